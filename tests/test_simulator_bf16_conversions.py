"""bf16 <-> fp32 conversions of tile rows (the simulator's vector kernels, bf16_rows.cc) give the
bits of their definition: a widening is the pattern shifted into fp32's top half, a narrowing
rounds to nearest even as ml_dtypes does, and a NaN keeps its sign and top payload bits with the
quiet bit set. Rows of odd length cover the kernels' scalar tails; an odd byte offset covers
unaligned bf16 rows. Each vector width is checked against the reference in
test_simulator_host_independence.py."""

import ml_dtypes
import numpy as np
import pytest

from hlo_lowering.program import DType, HbmAP, Memory, ProgramBuilder, TileAP
from compiler_harness import finish

_native = pytest.importorskip("jax_trn._native")


def _convert(x, out_dtype, src_offset=0):
  """x [P, F] DMA'd into SBUF, one VectorE tensor_copy to `out_dtype`, DMA'd back out."""
  p, free = x.shape
  code, out_code = DType.from_numpy(x.dtype), DType.from_numpy(np.dtype(out_dtype))
  b = ProgramBuilder()
  t = b.tensor("parameter", code, x.shape, index=0)
  y = b.tensor("output", out_code, x.shape, index=0)
  src = TileAP.dense(Memory.SBUF, code, 0, p, src_offset, (free,))
  dst = TileAP.dense(Memory.SBUF, out_code, 0, p, 16384 + src_offset, (free,))
  b.dma_copy(0, src, HbmAP.dense(t, x.shape))
  b.tensor_copy(dst, src)
  b.dma_copy(1, HbmAP.dense(y, x.shape), dst)
  outputs, _ = _native.run_program(finish(b), [x])
  return outputs[0]


def _bf16_bits_model(bits):
  """FloatToBf16 on uint32 patterns: nearest even, NaN made quiet with its sign and top bits."""
  bits = bits.astype(np.uint64)
  top = bits >> 16
  rounded = (bits + 0x7FFF + (top & 1)) >> 16
  nan = (bits & 0x7FFFFFFF) > 0x7F800000
  return np.where(nan, top | 0x40, rounded).astype(np.uint16)


def _f32_patterns(rows, cols):
  rng = np.random.default_rng(3)
  special = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7F7FFFFF, 0xFF7FFFFF,
                      0x7F7F8000, 0x7F7F7FFF, 0x00000001, 0x807FFFFF, 0x00008000, 0x00018000,
                      0x3F808000, 0x3F818000, 0x3F807FFF, 0x3F80FFFF, 0x7FC00000, 0x7F800001,
                      0xFF800001, 0x7FBFFFFF, 0xFFFFFFFF, 0x7F808000], np.uint32)
  bits = rng.integers(0, 2**32, rows * cols, dtype=np.uint64).astype(np.uint32)
  # Every tie (low 16 bits 0x8000) next to its neighbours, for a spread of high halves.
  ties = (rng.integers(0, 2**16, rows * cols // 4, dtype=np.uint32) << 16) | 0x8000
  bits[: ties.size] = ties
  bits[ties.size: 2 * ties.size] = ties - 1
  bits[-special.size:] = special
  return bits.reshape(rows, cols)


@pytest.mark.parametrize("src_offset", [0, 1])
def test_narrowing_rounds_to_nearest_even_and_quiets_nans(src_offset):
  bits = _f32_patterns(128, 1031)
  y = _convert(bits.view(np.float32), ml_dtypes.bfloat16, src_offset).view(np.uint16)
  np.testing.assert_array_equal(y, _bf16_bits_model(bits))
  x = bits.view(np.float32)
  finite = ~np.isnan(x)
  np.testing.assert_array_equal(y[finite], x[finite].astype(ml_dtypes.bfloat16).view(np.uint16))


@pytest.mark.parametrize("src_offset", [0, 1])
def test_widening_every_bf16_pattern_is_its_top_half(src_offset):
  patterns = np.arange(2**16, dtype=np.uint32)
  # 65536 patterns over rows of 1021 (odd): the last row's remainder pads with zeros.
  padded = np.zeros(65 * 1021, np.uint32)
  padded[: patterns.size] = patterns
  x = padded.astype(np.uint16).view(ml_dtypes.bfloat16).reshape(65, 1021)
  y = _convert(x, np.float32, src_offset).view(np.uint32)
  np.testing.assert_array_equal(y.reshape(-1), padded << 16)
