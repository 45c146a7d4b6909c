"""An instruction whose destination overlaps a source reads every source element before it
writes any, whatever the overlap: shifted by partitions or by elements within them, forwards or
backwards. The simulator works through large tiles in chunks (and on several host threads) only
when no source can meet the destination; these tiles are large enough to be chunked, so a wrong
"cannot meet" answer would show as elements computed from already-written ones."""

import numpy as np
import pytest

from hlo_lowering.program import Alu, DType, HbmAP, Memory, ProgramBuilder
from compiler_harness import finish

_native = pytest.importorskip("jax_trn._native")

# 64 partitions x 3000 = 192 000 elements: 24 chunks of the elementwise path, whose boundaries
# fall inside rows (so an overlap that chunking broke would show within a row).
_P, _F = 128, 3000


def _tile(partition_start, partition_count, element_offset):
  from hlo_lowering.program import TileAP
  return TileAP.dense(Memory.SBUF, DType.F32, partition_start, partition_count, 4 * element_offset, (_F,))


def _run(emit, x):
  """Loads x [P, 3F + 16] into SBUF, runs emit(builder), returns the region after."""
  from hlo_lowering.program import TileAP
  b = ProgramBuilder()
  src = b.tensor("parameter", DType.F32, x.shape, index=0, name="x")
  out = b.tensor("output", DType.F32, x.shape, index=0, name="y")
  region = TileAP.dense(Memory.SBUF, DType.F32, 0, _P, 0, x.shape[1:])
  b.dma_copy(0, region, HbmAP.dense(src, x.shape))
  emit(b)
  b.dma_copy(1, HbmAP.dense(out, x.shape), region)
  outputs, _ = _native.run_program(finish(b), [x])
  return outputs[0]


# (partition, element) of the destination's and the source's first element, and the partitions.
@pytest.mark.parametrize("dst_at,src_at,rows", [
    ((0, 3), (0, 0), 128),   # three elements right, same partitions
    ((0, 0), (0, 5), 128),   # five elements left
    ((0, _F + 8), (0, 0), 64),  # disjoint columns of the same partitions
    ((64, 0), (0, 0), 64),   # the same columns of other partitions
    ((0, 0), (64, 7), 64),   # other partitions, columns shifted
], ids=["elements_right", "elements_left", "disjoint_columns", "other_partitions", "other_partitions_shifted"])
@pytest.mark.parametrize("engine", ["vector_unary", "vector_binary", "scalar_activation"])
def test_overlapping_destination_reads_sources_first(engine, dst_at, src_at, rows):
  rng = np.random.default_rng(3)
  x = rng.standard_normal((_P, 3 * _F + 16)).astype(np.float32)
  dst, src = _tile(dst_at[0], rows, dst_at[1]), _tile(src_at[0], rows, src_at[1])
  other = _tile(0, rows, 2 * _F + 16) if engine == "vector_binary" else None

  def emit(b):
    if engine == "vector_unary":
      b.tensor_unary(Alu.NEG, dst, src)
    elif engine == "vector_binary":
      b.tensor_tensor(Alu.SUB, dst, src, other)
    else:
      b.activation(Alu.EXP, dst, src, scale=0.5)

  def window(at):
    return x[at[0]:at[0] + rows, at[1]:at[1] + _F]

  expected = x.copy()
  with np.errstate(over="ignore"):
    if engine == "vector_unary":
      result = -window(src_at)
    elif engine == "vector_binary":
      result = window(src_at) - window((0, 2 * _F + 16))
    else:
      result = np.exp(window(src_at) * np.float32(0.5))
  expected[dst_at[0]:dst_at[0] + rows, dst_at[1]:dst_at[1] + _F] = result
  actual = _run(emit, x)
  if engine == "scalar_activation":  # libm exp, not numpy's: compare within rounding
    np.testing.assert_allclose(actual, expected, rtol=1e-6)
  else:
    np.testing.assert_array_equal(actual, expected)
