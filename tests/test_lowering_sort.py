"""sort, argsort, multi-operand sort and argmax/argmin (gp_sort / gp_arg_reduce) against the
JAX CPU backend: NaN, -0.0, ties, integers, every axis."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import compiler_harness as harness
from hlo_lowering import driver
from hlo_lowering.errors import CompileError


def _special(shape, seed=0):
  """Floats with NaNs, ±0.0, ±inf and repeated values."""
  rng = np.random.default_rng(seed)
  x = rng.integers(-3, 4, shape).astype(np.float32) * 0.5
  flat = x.reshape(-1)
  picks = rng.choice(flat.size, size=min(flat.size, 12), replace=False)
  for k, value in zip(picks, [np.nan, -0.0, 0.0, np.inf, -np.inf, np.nan, -0.0, -np.nan] * 2):
    flat[k] = value
  return x


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_argmax_argmin_each_axis(axis):
  x = _special((5, 6, 130))
  harness.check(lambda x: (jnp.argmax(x, axis=axis), jnp.argmin(x, axis=axis)), x)
  assert driver.last_report().summary()["stablehlo.reduce"] == {"gpsimd": 2}


def test_argmax_ties_ints_and_flat():
  x = np.array([[3, 7, 7, 1], [2, 2, 2, 2], [-5, -9, -9, 0]], np.int32)
  harness.check(lambda x: (jnp.argmax(x, 1), jnp.argmin(x, 1), jnp.argmax(x), jnp.argmin(x, 0)),
                x)
  nan_first = np.array([[1.0, np.nan, 5.0, np.nan], [-0.0, 0.0, -0.0, 0.0]], np.float32)
  harness.check(lambda x: (jnp.argmax(x, 1), jnp.argmin(x, 1)), nan_first)
  harness.check(lambda x: jnp.argmax(x, 1), _special((4, 9)).astype(jnp.bfloat16))


def test_single_operand_reduce_is_unaffected():
  x = _special((6, 7))
  harness.check(lambda x: jnp.max(x, axis=1), x)  # single-operand reduce is unaffected


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_sort_and_argsort_floats(axis):
  x = _special((9, 140))
  harness.check(lambda x: (jnp.sort(x, axis=axis), jnp.argsort(x, axis=axis)), x)
  harness.check(lambda x: jnp.sort(x, axis=axis, descending=True), x)
  harness.check(lambda x: jnp.argsort(x, axis=axis, descending=True), x)


def test_sort_signed_zero_and_nan_bits():
  x = np.array([0.0, -0.0, np.nan, -np.nan, 1.0, -np.inf, -0.0, 0.0], np.float32)
  program = harness.check(lambda x: (jnp.sort(x), jnp.argsort(x)), x)
  outputs = harness.run_program(program, [x])
  expected = jnp.sort(jax.device_put(x, jax.devices("cpu")[0]))
  assert np.array_equal(outputs[0].view(np.uint32), np.asarray(expected).view(np.uint32))


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int8])
def test_sort_ints(dtype):
  x = np.random.default_rng(3).integers(0, 120, (4, 33)).astype(dtype)
  harness.check(lambda x: (jnp.sort(x, axis=1), jnp.argsort(x, axis=0)), x)


def test_sort_bool_and_bf16():
  harness.check(jnp.sort, np.array([True, False, True, False]))
  harness.check(lambda x: jnp.sort(x, axis=0), _special((7, 3)).astype(jnp.bfloat16))


def test_multi_operand_sort():
  keys = np.array([[3, 1, 3, 1, 2], [0, 0, 0, 0, 0]], np.int32)
  values = _special((2, 5))
  payload = np.arange(10, dtype=np.float32).reshape(2, 5)
  harness.check(lambda k, v, p: jax.lax.sort((k, v, p), dimension=1, num_keys=2), keys, values,
                payload)
  harness.check(lambda k, v, p: jax.lax.sort((v, k, p), dimension=1, num_keys=1), keys, values,
                payload)
  harness.check(lambda k, p: jax.lax.sort_key_val(k, p, dimension=0), keys, payload)


def test_sort_zero_size_and_scalar_rows():
  harness.check(lambda x: jnp.sort(x, axis=1), np.zeros((3, 0), np.float32))
  harness.check(lambda x: jnp.argsort(x, axis=0), np.ones((1, 4), np.float32))


def test_unrecognised_variadic_reduce_body_is_a_compile_error():
  def odd_reduce(x):
    return jax.lax.reduce((x, x), (0.0, 0.0), lambda a, b: (a[0] + b[1], a[1] * b[0]), (0,))

  with pytest.raises(CompileError, match=r"stablehlo.reduce .*not JAX's argmax/argmin.* at "
                                         r".*test_lowering_sort.py:\d+"):
    harness.compile_fn(odd_reduce, np.ones(4, np.float32))
