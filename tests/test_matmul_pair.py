"""X·B1 and Xᵀ·B2 as one trn.matmul_pair (passes/pair_matmuls.py, lowering/matmul_pair.py):
each tile of X crosses HBM once. Results match the CPU backend and are bit-identical to the two
matmuls lowered apart (the program compiled without pair-matmuls); a pair the schedule cannot
take is lowered apart, and matmuls that cannot be paired are left alone."""

import jax
import jax.numpy as jnp
from jax import lax
import numpy as np
import pytest

import compiler_harness as harness
from cpu_reference import sum_of_products_bounds
from hlo_lowering import importer, pipeline
from hlo_lowering.passes.pair_matmuls import PAIR, pair_formed

_BF16 = jnp.bfloat16


def _pair(x, b1, b2):
  """X·B1 and Xᵀ·B2 per batch (lax.dot_general: `@` drops a batch of one)."""
  dims = (((2,), (1,)), ((0,), (0,)))
  return lax.dot_general(x, b1, dims), lax.dot_general(jnp.swapaxes(x, 1, 2), b2, dims)


def _pairs(f, args) -> int:
  module = importer.import_program(jax.jit(f).lower(*args).as_text().encode(), "mlir")
  pipeline.run_pipeline(module)
  pairs = [op for op in module.main.body.ops if op.name == PAIR]
  assert all(pair_formed(op) for op in pairs)
  return len(pairs)


def _bits(a: np.ndarray) -> bytes:
  return np.ascontiguousarray(a).tobytes()


def _paired_and_apart(f, args, lnc):
  """The profiles of f compiled with and without pair-matmuls; their outputs' bits equal."""
  runs = []
  for skipped in ((), ("pair-matmuls",)):
    program = harness.compile_without(f, args, skipped, lnc=lnc)
    runs.append(harness.native().run_program(program, [np.asarray(a) for a in args]))
  (paired, profile), (apart, apart_profile) = runs
  assert [_bits(a) for a in paired] == [_bits(a) for a in apart]
  return profile, apart_profile


def _inputs(batch, m, k, n1, n2, dtype, seed=0):
  rng = np.random.default_rng(seed)
  return [rng.standard_normal(shape).astype(dtype)
          for shape in ((batch, m, k), (batch, k, n1), (batch, m, n2))]


# (batch, M, K, N1, N2, dtype, LNC): attention's dQ/dK at seq 512 (16 heads of 64), a partial
# last m-tile with unequal N and fp32, a batch split over two cores with one batch left over.
CASES = [(16, 512, 512, 64, 64, _BF16, 2), (2, 1100, 1024, 96, 32, np.float32, 1),
         (5, 384, 2304, 128, 64, _BF16, 2)]
_IDS = [f"{b}x{m}x{k}-n{n1}-{n2}-{np.dtype(d).name}-lnc{lnc}" for b, m, k, n1, n2, d, lnc in CASES]


@pytest.mark.parametrize("batch,m,k,n1,n2,dtype,lnc", CASES, ids=_IDS)
def test_a_pair_reads_x_once_with_the_unpaired_bits(batch, m, k, n1, n2, dtype, lnc):
  args = _inputs(batch, m, k, n1, n2, dtype)
  assert _pairs(_pair, args) == 1
  bounds = sum_of_products_bounds(_pair, *args, terms=max(m, k))
  harness.check(_pair, *args, lnc=lnc, bounds=bounds)
  profile, apart_profile = _paired_and_apart(_pair, args, lnc)
  x_bytes = args[0].nbytes
  assert profile["hbm_bytes"] <= apart_profile["hbm_bytes"] - 0.9 * x_bytes
  assert profile["device_time_ns"] < apart_profile["device_time_ns"]


def test_nan_inf_and_signed_zero_keep_the_unpaired_bits():
  x, b1, b2 = _inputs(8, 512, 1024, 64, 64, _BF16, seed=3)
  x[0, 5, 7], x[1, 130, 900], x[3, 511, 0] = np.nan, np.inf, -np.inf
  b2[2, 17, :] = -0.0
  b1[4, 1000, 3] = np.nan
  _paired_and_apart(_pair, [x, b1, b2], lnc=2)


def test_a_broadcast_x_is_lowered_as_two_matmuls():
  """X broadcast over the batch (stride 0): the pair is formed, and lowered apart."""
  def f(x, b1, b2):
    xs = jnp.broadcast_to(x, (8,) + x.shape)
    return _pair(xs, b1, b2)

  _, b1, b2 = _inputs(8, 512, 1024, 64, 64, _BF16)
  x = _inputs(1, 512, 1024, 64, 64, _BF16)[0][0]
  args = [x, b1, b2]
  assert _pairs(f, args) == 1
  harness.check(f, *args, lnc=2, bounds=sum_of_products_bounds(f, *args, terms=1024))
  _paired_and_apart(f, args, lnc=2)


def test_one_batch_on_two_cores_is_lowered_as_two_matmuls():
  """The pair splits by batch; one batch at LNC=2 goes apart, each matmul split by its own rows
  or columns (one core for the pair took attention's fwd+bwd of one head 448 -> 539 us)."""
  args = _inputs(1, 2048, 2048, 128, 128, _BF16)
  assert _pairs(_pair, args) == 1
  profile, apart_profile = _paired_and_apart(_pair, args, lnc=2)
  assert profile["device_time_ns"] == apart_profile["device_time_ns"]


def test_matmuls_that_depend_on_each_other_or_share_a_small_operand_stay_apart():
  """(pair_matmuls.py: at most 1 MiB, or one K tile, the pair measured 3 % slower.)"""
  def chained(x, b1):
    y1 = x @ b1
    return y1, jnp.swapaxes(x, -1, -2) @ (2 * y1)

  args = _inputs(8, 512, 1024, 64, 64, _BF16)[:2]
  assert _pairs(chained, args) == 0
  assert _pairs(_pair, _inputs(2, 256, 256, 64, 64, _BF16)) == 0  # 256 KiB
  assert _pairs(_pair, _inputs(64, 128, 128, 64, 64, _BF16)) == 0  # one K tile
  assert _pairs(_pair, _inputs(16, 128, 512, 64, 64, _BF16)) == 1  # 2 MiB, four K tiles
