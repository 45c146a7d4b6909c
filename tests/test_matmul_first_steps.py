"""The resident-rhs matmul's first two m-tiles multiplying the panel together as it streams in
(lowering/matmul_resident.py, `_pair_step`), and the LNC=2 split by m-tiles where it is estimated
shorter (lowering/matmul.py, `_core_shares`): every output bit is the one of the same matmul one
m-tile at a time (each output element keeps its K-accumulation order), and the modeled GEMMs
reach the figures these schedules were built for."""

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import compiler_harness as harness


def _data(shape, dtype, seed):
  return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _product(a, b, lnc):
  f = lambda x, y: jnp.matmul(x, y, preferred_element_type=jnp.float32)
  out, = harness.run_program(harness.compile_fn(f, a, b, lnc=lnc), [a, b])
  return out


@pytest.mark.parametrize("lnc", [1, 2])
@pytest.mark.parametrize("m,k,n", [
    (256, 384, 512),    # one n-block: the pair in one group of two banks
    (300, 256, 1536),   # three n-blocks in one group; a partial last m-tile
    (384, 256, 2048),   # four n-blocks (LNC=1): two groups of two, the panel loaded by group
    (256, 512, 3000),   # six n-blocks (LNC=1), the last partial: two groups of three
])
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn])
def test_first_two_m_tiles_together_keep_every_bit(lnc, m, k, n, dtype):
  a, b = _data((m, k), np.float32, 1).astype(dtype), _data((k, n), np.float32, 2).astype(dtype)
  whole = _product(a, b, lnc)
  # One m-tile of 128 rows at a time: no second m-tile to pair with.
  by_m_tile = np.concatenate([_product(a[r:r + 128], b, lnc) for r in range(0, m, 128)])
  np.testing.assert_array_equal(whole.view(np.uint32), by_m_tile.view(np.uint32))
  np.testing.assert_allclose(whole, a.astype(np.float32) @ b.astype(np.float32), rtol=2e-2,
                             atol=2e-2 * np.sqrt(k))


def _modeled_fraction_of_peak(a, b, peak_speedup: float) -> float:
  f = lambda x, y: jnp.matmul(x, y, preferred_element_type=jnp.bfloat16)
  cores = 2  # one trn2 JAX device at its default LNC
  program = harness.compile_fn(f, a, b, lnc=cores)
  _, profile = harness.native().run_program(program, [a, b])
  spec = harness.native().target_spec("trn2")
  peak = 2 * 128 * 128 * spec["tensor_clock_ghz"] * peak_speedup * cores
  return profile["matmul_flops"] / peak / profile["device_time_ns"]


@pytest.mark.slow
def test_fp8_gemm_2048_reaches_85_percent_of_the_fp8_peak():
  """Split by m-tiles (each core transposes half the lhs), the first two m-tiles together."""
  a, b = (_data((2048, 2048), np.float32, i).astype(ml_dtypes.float8_e4m3fn) for i in (1, 2))
  speedup = harness.native().target_spec("trn2")["matmul_fp8_speedup"]
  assert _modeled_fraction_of_peak(a, b, speedup) >= 0.85


@pytest.mark.slow
def test_bf16_gemm_4096_reaches_92_percent_of_the_peak():
  a, b = (_data((4096, 4096), np.float32, i).astype(ml_dtypes.bfloat16) for i in (1, 2))
  assert _modeled_fraction_of_peak(a, b, 1.0) >= 0.92
