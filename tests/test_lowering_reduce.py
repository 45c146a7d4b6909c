"""The native reduce lowering (hlo_lowering/lowering/reduce.py) against the JAX CPU backend:
add/max/min over each axis, several axes and all axes, with keepdims and odd sizes, float and
integer dtypes, NaN and -inf, runtime and non-identity init values; both layouts (kept rows on
partitions, and reduced elements spread over partitions when few rows are kept)."""

import random

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import compiler_harness as harness
from jax_trn import compilation

REDUCERS = {"sum": jnp.sum, "max": jnp.max, "min": jnp.min}
SHAPES_AXES = [((513,), None), ((300, 129), 0), ((300, 129), 1), ((300, 129), None),
               ((127, 3, 200), (0, 2)), ((127, 3, 200), 1), ((2, 129, 513), (1, 2)),
               ((1, 128, 1), None), ((5, 4000), 1), ((4000, 5), 0), ((3, 70000), None)]
FLOATS = [np.float32, ml_dtypes.bfloat16, np.float16]
INTS = [np.int32, np.int8, np.uint32]


def _data(shape, dtype, seed=0):
  rng = np.random.default_rng(seed)
  if np.dtype(dtype).kind in "iu":
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -100), min(info.max, 100), shape).astype(dtype)
  return rng.standard_normal(shape).astype(dtype)


def _check_native(f, *args, scale=1.0):
  harness.check(f, *args, scale=scale)
  assert compilation.last_report().summary()["stablehlo.reduce"] == {"native": 1}


def _cases(dtypes, count):
  everything = [(r, d, s, a) for r in REDUCERS for d in dtypes for s, a in SHAPES_AXES]
  return random.Random(0).sample(everything, count) + [
      (r, dtypes[0], s, a) for r in REDUCERS for s, a in SHAPES_AXES]


@pytest.mark.parametrize("reducer,dtype,shape,axis", _cases(FLOATS, 20))
def test_float_reductions(reducer, dtype, shape, axis):
  # Sums of n standard normals differ from CPU by the reordering of fp32 accumulation.
  _check_native(lambda x: REDUCERS[reducer](x, axis=axis), _data(shape, dtype), scale=30)


@pytest.mark.parametrize("reducer,dtype,shape,axis", _cases(INTS, 12))
def test_integer_reductions(reducer, dtype, shape, axis):
  # jnp.sum of int8 accumulates in int32; lax.reduce keeps the operand dtype (wraps).
  _check_native(lambda x: REDUCERS[reducer](x, axis=axis), _data(shape, dtype))


@pytest.mark.parametrize("dtype", [np.int8, np.int32])
def test_integer_sum_wraps_like_xla(dtype):
  x = np.full((3, 1000), 100, dtype)
  _check_native(lambda x: jax.lax.reduce(x, dtype(0), jax.lax.add, (1,)), x)
  _check_native(lambda x: jax.lax.reduce(x, dtype(0), jax.lax.add, (0, 1)), x)


@pytest.mark.parametrize("shape,axis", [((300, 129), 1), ((300, 129), None), ((129, 700), 0)])
def test_keepdims(shape, axis):
  _check_native(lambda x: jnp.sum(x, axis=axis, keepdims=True), _data(shape, np.float32),
                scale=30)


@pytest.mark.parametrize("reducer", ["max", "min"])
@pytest.mark.parametrize("axis", [0, 1, None])
def test_infinities(reducer, axis):
  x = _data((130, 600), np.float32)
  x[100, :] = -np.inf
  x[:, 7] = np.inf
  _check_native(lambda x: REDUCERS[reducer](x, axis=axis), x)
  _check_native(lambda x: REDUCERS[reducer](x, axis=axis), np.full((4, 600), -np.inf, np.float32))


@pytest.mark.parametrize("reducer", ["max", "min"])
@pytest.mark.parametrize("axis", [0, 1, None])
def test_nan_propagates(reducer, axis):
  """max/min propagate NaN (StableHLO's maximum/minimum; docs/numerics.md). JAX's CPU backend
  drops NaN in its vectorised reductions, so the reference here is NumPy's NaN-propagating one."""
  x = _data((130, 600), np.float32)
  x[3, 5] = np.nan
  x[129, 599] = np.nan
  f = lambda x: REDUCERS[reducer](x, axis=axis)
  (actual,) = harness.run_program(harness.compile_fn(f, x), [x])
  assert compilation.last_report().summary()["stablehlo.reduce"] == {"native": 1}
  expected = {"max": np.max, "min": np.min}[reducer](x, axis=axis)
  np.testing.assert_array_equal(actual, expected)


def test_bf16_sum_accumulates_in_fp32():
  # 4096 values of 1 + small: a bf16 accumulator would stall at 256 (1 ulp = 2 there).
  x = (1 + _data((2, 4096), np.float32) * 1e-3).astype(ml_dtypes.bfloat16)
  _check_native(lambda x: jax.lax.reduce(x, ml_dtypes.bfloat16(0), jax.lax.add, (1,)), x)
  _check_native(lambda x: jnp.sum(x), x)


def test_init_values():
  x = _data((129, 300), np.float32)
  _check_native(lambda x: jax.lax.reduce(x, np.float32(2.5), jax.lax.add, (1,)), x, scale=30)
  _check_native(lambda x: jax.lax.reduce(x, np.float32(0.5), jax.lax.max, (0, 1)), x)
  _check_native(lambda x, v: jax.lax.reduce(x, v, jax.lax.min, (0,)), x, np.float32(-1.0))
  _check_native(lambda x, v: jax.lax.reduce(x, v, jax.lax.add, (0, 1)), x, np.float32(3.0),
                scale=30)
  xi = _data((40, 1000), np.int32)
  _check_native(lambda x, v: jax.lax.reduce(x, v, jax.lax.max, (1,)), xi, np.int32(90))


def test_mean_and_softmax_denominator():
  x = _data((257, 1025), np.float32)
  harness.check(lambda x: jnp.mean(x, axis=-1), x, scale=30)
  harness.check(lambda x: jax.nn.softmax(x, axis=-1), x, scale=10)
  assert compilation.last_report().summary()["stablehlo.reduce"] == {"native": 2}


def test_empty_reduction_is_init():
  _check_native(lambda x: jnp.sum(x, axis=1), _data((4, 0), np.float32))
  _check_native(lambda x: jnp.max(x, axis=0, initial=-3.0), _data((0, 5), np.float32))


def test_multiply_reduction_stays_on_gpsimd():
  harness.check(lambda x: jnp.prod(x, axis=1), _data((20, 10), np.float32) * 0.5, scale=10)
  assert compilation.last_report().summary()["stablehlo.reduce"] == {"gpsimd": 1}


@pytest.mark.parametrize("reducer", list(REDUCERS))
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.int32])
@pytest.mark.parametrize("shape,axis", [((300, 129), 0), ((260, 5000), 0), ((64, 32, 512), (0, 1)),
                                        ((3, 200, 70), 1), ((130, 3, 200), (0, 1))])
def test_leading_axis_layout(reducer, dtype, shape, axis):
  """Reduced elements on partitions, the contiguous kept dim on the free axis."""
  scale = 30 if reducer == "sum" and np.dtype(dtype).kind == "f" else 1
  _check_native(lambda x: REDUCERS[reducer](x, axis=axis), _data(shape, dtype), scale=scale)


def test_leading_axis_layout_with_runtime_init():
  x, init = _data((300, 129), np.float32), np.float32(2.5)
  _check_native(lambda x, i: jax.lax.reduce(x, i, jax.lax.add, (0,)), x, init, scale=30)
  _check_native(lambda x, i: jax.lax.reduce(x, i, jax.lax.max, (0,)), x, init)


@pytest.mark.parametrize("reducer", ["sum", "max"])
def test_axis0_reduction_within_2x_of_axis1(reducer):
  x = _data((4096, 1024), np.float32)
  times = {}
  for axis in (0, 1):
    f = lambda x: REDUCERS[reducer](x, axis=axis)
    _check_native(f, x, scale=300)  # sums of 4096 or 1024 standard normals
    program = harness.compile_fn(f, x)
    times[axis] = harness.native().run_program(program, [x])[1]["device_time_ns"]
  print(f"{reducer} [4096, 1024]: axis 0 {times[0] / 1e3:.1f} us, axis 1 {times[1] / 1e3:.1f} us")
  assert times[0] < 2 * times[1]


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.int32])
def test_reduction_over_unit_dims_is_a_reshape_as_on_cpu(dtype):
  """simplify-unit-reduce: a sum over a batch dim of one is its operand reshaped, bit for bit as
  on the CPU backend (-0.0 stays; XLA ignores a non-identity init there too), not one reduction
  row per element."""
  x = _data((1, 16, 64, 96), dtype)
  if np.dtype(dtype).kind == "f":
    x[0, 0, 0, :3] = [-0.0, np.nan, -np.inf]
  for f in (lambda x: jnp.sum(x, axis=0, dtype=x.dtype), lambda x: jnp.max(x, axis=(0,)),
            lambda x: jax.lax.reduce(x, x.dtype.type(3), jax.lax.add, (0,))):
    program = harness.check(f, x, scale=0)
    assert "stablehlo.reduce" not in compilation.last_report().summary()
    assert len(program) < 20_000, len(program)
    cpu = np.asarray(jax.jit(f)(jax.device_put(x, jax.devices("cpu")[0])))
    actual = np.asarray(harness.run_program(program, [x])[0])
    assert np.array_equal(actual.view(np.uint8), cpu.view(np.uint8))
