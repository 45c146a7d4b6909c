"""nki.isa.bn_stats / bn_aggr (VectorE's mean and variance, program opcodes 39 and 40) compute
what NKI documents, bit for bit against a NumPy model of their fp32 arithmetic, close to
NumPy's own mean and variance, at NKI's published cost; bad operands fail at the kernel line."""

import ml_dtypes
import numpy as np
import pytest

from jax_trn import nki
import jax_trn.nki.isa as nisa
import jax_trn.nki.language as nl

native = pytest.importorskip("jax_trn._native", reason="jax_trn._native is not built",
                             exc_type=ImportError)

rng = np.random.default_rng(11)


def _halves(row: np.ndarray) -> list[float]:
  """bn_stats of one partition: (count, mean, Σ (x - mean)²) of the even elements, then the odd
  ones, each sum folded in fp32 from the first element in order."""
  out = []
  for half in (row[0::2], row[1::2]):
    total, count = np.float32(0), np.float32(0)
    for x in half:
      total, count = np.float32(total + x), np.float32(count + 1)
    mean = np.float32(total / count) if count else np.float32(0)
    squares = np.float32(0)
    for x in half:
      squares = np.float32(squares + np.float32(x - mean) * np.float32(x - mean))
    out += [count, mean, squares]
  return out


def _aggregate(row: np.ndarray) -> list[float]:
  """bn_aggr of one partition: Chan et al.'s pairwise update over its triples, in fp32."""
  count = mean = m2 = np.float32(0)
  for n, m, s in row.reshape(-1, 3):
    if not n > 0:
      continue
    total = np.float32(count + n)
    delta = np.float32(m - mean)
    mean = np.float32(mean + np.float32(delta * np.float32(n / total)))
    m2 = np.float32(np.float32(m2 + s) + np.float32(np.float32(delta * delta)
                                                     * np.float32(np.float32(count * n) / total)))
    count = total
  return [mean, np.float32(m2 / count) if count else np.float32(0)]


@nki.jit
def statistics(x):
  """bn_stats over each 512-column slice of x (fp32 [P, 6] each), then bn_aggr of them all."""
  rows, cols = x.shape
  tile = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
  nisa.dma_copy(dst=tile, src=x)
  chunks = (cols + nl.tile_size.bn_stats_fmax - 1) // nl.tile_size.bn_stats_fmax
  stats = nl.ndarray((rows, 6 * chunks), dtype=nl.float32, buffer=nl.sbuf)
  for c in range(chunks):
    c0 = c * nl.tile_size.bn_stats_fmax
    nisa.bn_stats(dst=stats[:, 6 * c:6 * c + 6],
                  data=tile[:, c0:min(cols, c0 + nl.tile_size.bn_stats_fmax)])
  mean_var = nl.ndarray((rows, 2), dtype=nl.float32, buffer=nl.sbuf)
  nisa.bn_aggr(dst=mean_var, data=stats)
  stats_out = nl.ndarray(stats.shape, dtype=nl.float32, buffer=nl.shared_hbm)
  nisa.dma_copy(dst=stats_out, src=stats)
  out = nl.ndarray((rows, 2), dtype=nl.float32, buffer=nl.shared_hbm)
  nisa.dma_copy(dst=out, src=mean_var)
  return stats_out, out


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
@pytest.mark.parametrize("shape", [(128, 512), (97, 37), (5, 1), (3, 1100)])
def test_bn_stats_and_bn_aggr_match_numpy(shape, dtype):
  x = (rng.standard_normal(shape) * 3 + 1.5).astype(dtype)
  stats, mean_var = statistics(x)
  x32 = x.astype(np.float32)
  cols = shape[1]
  expected_stats = np.array([sum((_halves(row[c:c + 512]) for c in range(0, cols, 512)), [])
                             for row in x32], dtype=np.float32)
  np.testing.assert_array_equal(stats.view(np.uint32), expected_stats.view(np.uint32))
  expected = np.array([_aggregate(row) for row in expected_stats], dtype=np.float32)
  np.testing.assert_array_equal(mean_var.view(np.uint32), expected.view(np.uint32))
  # ... which is the mean and (population) variance.
  np.testing.assert_allclose(mean_var[:, 0], x32.astype(np.float64).mean(axis=1), rtol=1e-5,
                             atol=1e-6)
  np.testing.assert_allclose(mean_var[:, 1], x32.astype(np.float64).var(axis=1), rtol=1e-4,
                             atol=1e-6)


def test_bn_stats_costs_what_nki_publishes():
  """max(MIN_II, N) VectorE cycles per bn_stats, max(MIN_II, 13 N / 3) for bn_aggr, each plus
  the fixed instruction cost (docs/timing-model.md)."""
  spec = native.target_spec("trn2")
  x = rng.standard_normal((128, 1024)).astype(np.float32)
  statistics(x)
  busy = statistics.last_simulation.profile.engine_busy_ns("DVE")
  fixed = spec["instruction_fixed_cycles"]
  cycles = 2 * (fixed + 512) + (fixed + max(64, 13 * 12 // 3))
  assert busy == pytest.approx(cycles / spec["vector_clock_ghz"], rel=1e-6)


@nki.jit
def stats_over_too_many_elements(x):
  tile = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.sbuf)
  nisa.dma_copy(dst=tile, src=x)
  stats = nl.ndarray((128, 6), dtype=nl.float32, buffer=nl.sbuf)
  nisa.bn_stats(dst=stats, data=tile)  # <- too many
  return x


@nki.jit
def aggregates_a_partial_triple(x):
  tile = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.sbuf)
  nisa.dma_copy(dst=tile, src=x)
  mean_var = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.sbuf)
  nisa.bn_aggr(dst=mean_var, data=tile[:, 0:4])  # <- partial triple
  return x


@nki.jit
def stats_into_a_wrong_shape(x):
  tile = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.sbuf)
  nisa.dma_copy(dst=tile, src=x)
  stats = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
  nisa.bn_stats(dst=stats, data=tile[:, 0:512])  # <- wrong dst
  return x


@pytest.mark.parametrize("kernel, marker, message", [
    (stats_over_too_many_elements, "too many", "more than nl.tile_size.bn_stats_fmax"),
    (aggregates_a_partial_triple, "partial triple", "must hold (count, mean"),
    (stats_into_a_wrong_shape, "wrong dst", "must hold 6 values per partition"),
])
def test_bad_operands_fail_at_the_kernel_line(kernel, marker, message):
  x = np.zeros((128, 1024), dtype=np.float32)
  with pytest.raises(nki.KernelError, match="test_nki_bn_stats.py:") as error:
    kernel.trace(x)
  assert message in str(error.value)
  assert f"# <- {marker}" in str(error.value)


def test_statistics_inside_jit_equal_the_numpy_run(trn):
  """bn_stats and bn_aggr are kernel instructions inside jax.jit too (the custom call's payload),
  with the NumPy run's bits."""
  import jax
  x = rng.standard_normal((97, 700)).astype(np.float32)
  expected = statistics(x)
  actual = jax.jit(statistics)(jax.device_put(x, trn))
  for a, e in zip(actual, expected, strict=True):
    np.testing.assert_array_equal(np.asarray(a).view(np.uint32), e.view(np.uint32))
