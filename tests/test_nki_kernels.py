"""Tutorial-style NKI kernels (tests/nki_tutorial_kernels.py) give the plain-JAX reference's
results on the JAX CPU backend, over odd shapes: run on NumPy arrays (the kernel alone on the
simulator, with its modeled time) and on jax.Arrays inside jax.jit (a custom call the compiler
lowers in place, scheduled with the ops around it)."""

import zlib

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jax_trn.nki.language as nl
import nki_tutorial_kernels as kernels
from cpu_reference import assert_close

pytest.importorskip("jax_trn._native", reason="jax_trn._native is not built", exc_type=ImportError)

rng = np.random.default_rng(0)


def _normal(shape, dtype=np.float32):
  return rng.standard_normal(shape).astype(dtype)


def _arguments(name: str) -> tuple:
  """Case `name`'s inputs, the same whichever tests ran before (the generator is reseeded)."""
  global rng
  rng = np.random.default_rng(zlib.crc32(name.encode()))
  return CASES[name][2]()


def _softmax(x):
  return jax.nn.softmax(x.astype(jnp.float32), axis=-1).astype(x.dtype)


def _rmsnorm(x, gamma, eps=1e-6):
  x32 = x.astype(jnp.float32)
  scale = jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
  return (x32 * scale * gamma.astype(jnp.float32)).astype(x.dtype)


def _on_cpu(f, *args):
  cpu = jax.devices("cpu")[0]
  return np.asarray(jax.jit(f)(*[jax.device_put(a, cpu) for a in args]))


# Each case: kernel, plain-JAX reference, argument builder, tolerance scale.
CASES = {
    "tensor_add": (kernels.tensor_add, jnp.add,
                   lambda: (_normal((200, 700)), _normal((200, 700))), 1.0),
    "tensor_add_legacy": (kernels.tensor_add_legacy, jnp.add,
                          lambda: (_normal((97, 33)), _normal((97, 33))), 1.0),
    "exp_indexed": (kernels.exp_indexed, jnp.exp, lambda: (_normal((300, 70)),), 2.0),
    "matmul_f32": (kernels.matmul, lambda a, b: jnp.matmul(a.T, b, precision="highest"),
                   lambda: (_normal((300, 200)), _normal((300, 600))), 16.0),
    "matmul_bf16": (kernels.matmul,
                    lambda a, b: jnp.matmul(a.T, b, preferred_element_type=jnp.float32
                                            ).astype(a.dtype),
                    lambda: (_normal((130, 129), ml_dtypes.bfloat16),
                             _normal((130, 513), ml_dtypes.bfloat16)), 2.0),
    "softmax": (kernels.softmax, _softmax, lambda: (_normal((131, 333)),), 2.0),
    "rmsnorm": (kernels.rmsnorm, _rmsnorm, lambda: (_normal((257, 96)), _normal((96,))), 2.0),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_kernel_on_numpy_matches_the_jax_reference(name):
  kernel, reference, _, scale = CASES[name]
  args = _arguments(name)
  result = kernel(*args)
  assert result.shape == args[0].shape[:1] + result.shape[1:] or name.startswith("matmul")
  assert_close([result], [_on_cpu(reference, *args)], scale=scale)
  assert kernel.last_simulation.device_time_ns > 0


@pytest.mark.parametrize("name", sorted(CASES))
def test_kernel_inside_jit_matches_the_jax_reference(name, trn):
  kernel, reference, _, scale = CASES[name]
  args = _arguments(name)

  def program(*xs):  # the kernel between ordinary ops, so it is scheduled with them
    return kernel(*[x * 1 for x in xs]) + 1

  def expected(*xs):
    return reference(*[x * 1 for x in xs]) + 1

  actual = np.asarray(jax.jit(program)(*[jax.device_put(a, trn) for a in args]))
  assert_close([actual], [_on_cpu(expected, *args)], scale=scale)


def test_kernel_outside_jit_on_jax_arrays(trn):
  a, b = _normal((64, 40)), _normal((64, 40))
  result = kernels.tensor_add(jax.device_put(a, trn), jax.device_put(b, trn))
  assert isinstance(result, jax.Array)
  np.testing.assert_array_equal(np.asarray(result), a + b)


def test_kernel_traces_once_per_signature():
  a, b = _normal((8, 8)), _normal((8, 8))
  first = kernels.tensor_add.trace(a, b)
  assert kernels.tensor_add.trace(a + 1, b) is first
  assert kernels.tensor_add.trace(_normal((8, 9)), _normal((8, 9))) is not first


def test_simulation_reports_modeled_time_per_kernel_line():
  x = _normal((256, 512))
  simulation = kernels.softmax.simulate(x)
  profile = simulation.profile
  assert simulation.device_time_ns == profile.device_time_ns > 0
  lines = {entry.location for entry in profile.by_line()}
  assert any("nki_tutorial_kernels.py" in line for line in lines), lines
  for engine in ("ACT", "DVE"):
    assert profile.engine_busy_ns(engine) > 0


def test_matmul_kernel_keeps_tensor_engine_busy():
  lhs_t, rhs = _normal((512, 128), ml_dtypes.bfloat16), _normal((512, 512), ml_dtypes.bfloat16)
  profile = kernels.matmul.simulate(lhs_t, rhs).profile
  assert profile.matmul_flops == 2 * 128 * 512 * 512
  assert profile.engine_busy_ns("PE") > 0


def test_grid_launch_runs_every_program_id():
  a, b = _normal((4 * 128, 48)), _normal((4 * 128, 48))
  np.testing.assert_array_equal(kernels.tensor_add_grid[4](a, b), a + b)
  np.testing.assert_array_equal(kernels.tensor_add_grid[nl.nc(2)](a[:256], b[:256]),
                                a[:256] + b[:256])
