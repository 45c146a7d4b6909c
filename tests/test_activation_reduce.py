"""ScalarE's activation_reduce in the simulator: a per-partition scale, and the row sum of the
result in the same instruction, against NumPy; the sum has exactly the bits of tensor_reduce add
over the activation's output, or (sum_before_rounding, as the chip's reduce registers sum) over
its fp32 values before their rounding to dst's dtype; the format and the loader's rules."""

import ml_dtypes
import numpy as np
import pytest

from hlo_lowering.program import Alu, DType, HbmAP, Memory, ProgramBuilder, Scalar, TileAP
from hlo_lowering.program.enums import RowSum
from hlo_lowering.program.reader import read_program
from compiler_harness import finish

_native = pytest.importorskip("jax_trn._native")
rng = np.random.default_rng(7)


def _tile(dtype, partitions, offset, free):
  return TileAP.dense(Memory.SBUF, dtype, 0, partitions, offset, free)


def _run(x, scale, bias, func, out_dtype, sum_before_rounding=False):
  """activation_reduce(func, y, x, scale, bias, dst_sum=s) and tensor_reduce(add) of y: the
  outputs y, s and the tensor_reduce sum."""
  p, f = x.shape
  b = ProgramBuilder()
  tx = b.tensor("parameter", DType.F32, x.shape, index=0, name="x")
  src = _tile(DType.F32, p, 0, (f,))
  b.dma_copy(0, src, HbmAP.dense(tx, x.shape))
  operands = []
  for i, value in enumerate((scale, bias), start=1):
    if isinstance(value, np.ndarray):
      t = b.tensor("parameter", DType.F32, value.shape, index=i, name=f"p{i}")
      tile = _tile(DType.F32, p, 8192 + 64 * i, (1,))
      b.dma_copy(i, tile, HbmAP.dense(t, value.shape))
      operands.append(tile)
    else:
      operands.append(Scalar(DType.F32, value))
  dst = _tile(out_dtype, p, 16384, (f,))
  fused, reduced = _tile(DType.F32, p, 32768, (1,)), _tile(DType.F32, p, 32832, (1,))
  b.activation_reduce(func, dst, src, scale=operands[0], bias=operands[1], dst_sum=fused,
                      sum_before_rounding=sum_before_rounding)
  b.tensor_reduce(Alu.ADD, reduced, dst)
  outs = [(dst, out_dtype, (p, f)), (fused, DType.F32, (p, 1)), (reduced, DType.F32, (p, 1))]
  for k, (tile, dtype, shape) in enumerate(outs):
    t = b.tensor("output", dtype, shape, index=k, name=f"y{k}")
    b.dma_copy(15, HbmAP.dense(t, shape), tile)
  inputs = [x] + [v for v in (scale, bias) if isinstance(v, np.ndarray)]
  outputs, _ = _native.run_program(finish(b), inputs)
  return outputs


def _sequential_sum(rows: np.ndarray) -> np.ndarray:
  """Each row's fp32 sum folded element 0 first (cumsum adds in order)."""
  return np.cumsum(rows.astype(np.float32), axis=1, dtype=np.float32)[:, -1:]


def test_per_partition_scale_and_bias_with_the_row_sum():
  x = rng.standard_normal((96, 200)).astype(np.float32)
  scale = rng.standard_normal((96, 1)).astype(np.float32)
  bias = rng.standard_normal((96, 1)).astype(np.float32)
  y, fused, reduced = _run(x, scale, bias, Alu.EXP, DType.F32)
  np.testing.assert_allclose(y, np.exp(x * scale + bias), rtol=2e-6)
  np.testing.assert_array_equal(fused, reduced)
  np.testing.assert_array_equal(fused, _sequential_sum(y))


def test_sum_of_a_narrow_dst_is_over_the_rounded_values():
  x = rng.standard_normal((128, 333)).astype(np.float32)
  y, fused, reduced = _run(x, 1.0, -0.5, Alu.TANH, DType.BF16)
  expected = np.tanh(x - np.float32(0.5)).astype(ml_dtypes.bfloat16)
  np.testing.assert_allclose(y.astype(np.float32), expected.astype(np.float32), rtol=1e-2)
  np.testing.assert_array_equal(fused, reduced)
  np.testing.assert_array_equal(fused, _sequential_sum(y))


def test_a_sum_before_rounding_is_over_the_fp32_values_and_dst_is_as_without_it():
  x = rng.standard_normal((128, 333)).astype(np.float32)
  written = _run(x, 1.0, -0.5, Alu.TANH, DType.BF16)
  y, fused, reduced = _run(x, 1.0, -0.5, Alu.TANH, DType.BF16, sum_before_rounding=True)
  np.testing.assert_array_equal(y, written[0])
  np.testing.assert_array_equal(reduced, written[2])
  activated = _run(x, 1.0, -0.5, Alu.TANH, DType.F32)[0]  # the same activation kept in fp32
  np.testing.assert_array_equal(fused, _sequential_sum(activated))
  assert not np.array_equal(fused, reduced)  # the rounding to bf16 changes the sums


def test_square_is_the_exact_product():
  x = rng.standard_normal((64, 130)).astype(np.float32)
  scale = rng.standard_normal((64, 1)).astype(np.float32)
  y, fused, _ = _run(x, scale, 0.0, Alu.SQUARE, DType.F32)
  scaled = x * scale
  np.testing.assert_array_equal(y, scaled * scaled)
  np.testing.assert_array_equal(fused, _sequential_sum(scaled * scaled))


def test_a_zero_bias_keeps_signed_zeros_and_no_sum_is_optional():
  b = ProgramBuilder()
  tx = b.tensor("parameter", DType.F32, (4, 3), index=0, name="x")
  ts = b.tensor("parameter", DType.F32, (4, 1), index=1, name="s")
  ty = b.tensor("output", DType.F32, (4, 3), index=0, name="y")
  src, scale, dst = _tile(DType.F32, 4, 0, (3,)), _tile(DType.F32, 4, 64, (1,)), _tile(DType.F32, 4, 128, (3,))
  b.dma_copy(0, src, HbmAP.dense(tx, (4, 3)))
  b.dma_copy(1, scale, HbmAP.dense(ts, (4, 1)))
  b.activation_reduce(Alu.COPY, dst, src, scale=scale)
  b.dma_copy(2, HbmAP.dense(ty, (4, 3)), dst)
  x = np.array([[-0.0, 1.0, 2.0]] * 4, np.float32)
  s = np.array([[1.0], [2.0], [-1.0], [0.5]], np.float32)
  (y,), _ = _native.run_program(finish(b), [x, s])
  np.testing.assert_array_equal(y, x * s)
  assert np.signbit(y[0, 0]) and not np.signbit(y[2, 0])


def _one_activation(**operands) -> bytes:
  b = ProgramBuilder()
  b.tensor("parameter", DType.F32, (128, 64), index=0, name="x")
  b.activation_reduce(Alu.EXP, _tile(DType.F32, 128, 0, (64,)), _tile(DType.F32, 128, 256, (64,)),
                      debug=b.debug("stablehlo.exponential", "jit(f)/exp", "f.py:3:1"), **operands)
  return b.serialize()


@pytest.mark.parametrize("operands, message", [
    ({"dst_sum": _tile(DType.BF16, 128, 512, (1,))}, r"dst_sum must be fp32 \[128, 1\]"),
    ({"dst_sum": _tile(DType.F32, 128, 512, (2,))}, r"dst_sum must be fp32 \[128, 1\]"),
    ({"dst_sum": _tile(DType.F32, 64, 512, (1,))}, r"dst_sum must be fp32 \[128, 1\]"),
    ({"scale": _tile(DType.F32, 64, 512, (1,))}, r"per-partition scalar must be \[128, 1\]"),
])
def test_loader_rejects_bad_operands(operands, message):
  with pytest.raises(ValueError, match=rf"ACT instruction 0 \(activation_reduce; "
                                       rf"stablehlo.exponential.*{message}"):
    _native.program_info(_one_activation(**operands))


def test_the_format_round_trips_the_optional_sum():
  summed = _tile(DType.F32, 128, 512, (1,))
  b = ProgramBuilder()
  b.tensor("parameter", DType.F32, (128, 64), index=0, name="x")
  dst, src = _tile(DType.F32, 128, 0, (64,)), _tile(DType.F32, 128, 256, (64,))
  b.activation_reduce(Alu.SQUARE, dst, src, dst_sum=summed)
  b.activation_reduce(Alu.COPY, dst, src, scale=summed)
  b.activation_reduce(Alu.EXP, dst, src, dst_sum=summed, sum_before_rounding=True)
  insts = read_program(b.serialize()).blocks[0].instructions
  assert [i.operands["dst_sum"] for i in insts] == [summed, None, summed]
  assert [i.operands["sum_of"] for i in insts] == [RowSum.WRITTEN, RowSum.NONE, RowSum.ACTIVATED]
  assert insts[1].operands["scale"] == summed


def test_loader_refuses_an_unknown_row_sum_by_name():
  b = ProgramBuilder()
  b.tensor("parameter", DType.F32, (128, 64), index=0, name="x")
  b.activation_reduce(Alu.EXP, _tile(DType.F32, 128, 0, (64,)), _tile(DType.F32, 128, 256, (64,)),
                      dst_sum=_tile(DType.F32, 128, 512, (1,)))
  b.instructions[-1].operands["sum_of"] = 3  # a mode this loader does not know
  with pytest.raises(ValueError, match=r"activation_reduce sum 3 \(expected 0: none, 1: of dst "
                                       r"as written, 2: of the activated values\)"):
    _native.program_info(b.serialize())
