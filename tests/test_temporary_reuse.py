"""An executable keeps its temporaries between executions (pjrt_plugin/sim/temporary_pool.h):
every execution still starts with all-zero temporaries, after a successful one, after one that
failed half-way, and while another execution of the same executable runs on another core."""

import numpy as np
import pytest

import jax
import jax.numpy as jnp
from hlo_lowering.program import Alu, DType, HbmAP, ProgramBuilder, Scalar
from compiler_harness import finish
from test_pjrt_buffers import F32, devices, fetch, put
from test_pjrt_execute import make_client  # noqa: F401 (a fixture)

S32 = 4
N = 4096


def _reads_its_temporaries_first() -> bytes:
  """out = scratch + x, then scratch = x; then count += 1 until count >= limit (a loop a low
  TRN_MAX_LOOP_ITERATIONS stops half-way, with scratch and count written)."""
  b = ProgramBuilder()
  x = b.tensor("parameter", DType.F32, (N,), index=0, name="x")
  limit = b.tensor("parameter", DType.S32, (1,), index=1, name="limit")
  out = b.tensor("output", DType.F32, (N,), index=0, name="out")
  scratch = b.tensor("temporary", DType.F32, (N,), name="scratch")
  count = b.tensor("temporary", DType.S32, (1,), name="count")
  pred = b.tensor("temporary", DType.PRED, (1,), name="pred")
  one = b.constant(DType.S32, (1,), np.int32([1]).tobytes(), name="one")
  whole, scalar = (lambda t: HbmAP.dense(t, (N,))), (lambda t: HbmAP.dense(t, (1,)))
  b.gp_elementwise(Alu.ADD, whole(out), [whole(scratch), whole(x)])
  b.gp_copy(whole(scratch), whole(x))
  body, end = b.new_block(), b.new_block()
  b.jump(body)
  b.set_block(body)
  b.gp_elementwise(Alu.ADD, scalar(count), [scalar(count), scalar(one)])
  b.gp_elementwise(Alu.LT, scalar(pred), [scalar(count), scalar(limit)])
  b.branch(scalar(pred), body, end)
  return finish(b)


def test_each_execution_starts_with_zero_temporaries(make_client, monkeypatch):
  client = make_client()
  d0 = devices(client)[0]
  exe = client.deserialize_executable(_reads_its_temporaries_first())
  x = np.arange(N, dtype=np.float32)
  on_device = put(client, x, F32, device=d0)
  limit = lambda n: put(client, np.int32([n]), S32, device=d0)
  for _ in range(2):  # the second reads what the first left in scratch were it not zeroed
    (out,) = exe(on_device, limit(1))
    np.testing.assert_array_equal(fetch(out, np.float32, (N,)), x)
    out.close()
  monkeypatch.setenv("TRN_MAX_LOOP_ITERATIONS", "100")
  with pytest.raises(Exception, match="entered more than 100 times"):
    exe(on_device, limit(1000))  # fails after writing scratch and 100 counts
  # 99 iterations pass the cap only if count starts at zero again.
  (out,) = exe(on_device, limit(99))
  np.testing.assert_array_equal(fetch(out, np.float32, (N,)), x)
  out.close()
  exe.close()


def test_concurrent_executions_of_one_executable_keep_their_own_temporaries():
  # bitcast_convert goes through an HBM temporary; pmap runs one executable on both cores at
  # once, each with its own data: a shared set would mix them.
  trn = jax.devices("trn")[:2]
  f = jax.pmap(lambda x: jax.lax.bitcast_convert_type(x * 2.0, jnp.int32) + 1, devices=trn)
  rng = np.random.default_rng(0)
  for _ in range(6):
    x = rng.standard_normal((2, 1024, 1024), np.float32)
    expected = (x * 2.0).view(np.int32) + 1
    np.testing.assert_array_equal(np.asarray(f(x)), expected)
