"""Bugs found by running JAX's own test suite (tag jax-v0.10.2, tests/lax_test.py and friends)
against the plugin; each test names the JAX test that exposed it."""

import jax
import numpy as np
import pytest
from jax import lax

import compiler_harness


@pytest.mark.parametrize("shape,reps", [((2, 3), (1, 0)), ((2, 3), (0, 2)), ((4,), (0,))])
def test_zero_size_result_returned_through_reshapes(shape, reps):
  # lax_test.py::testTile: tile by 0 is reshape -> broadcast to a zero-size shape -> reshape; the
  # output was planned on the broadcast and taken again by the reshape (internal compiler error).
  x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
  compiler_harness.check(lambda v: lax.tile(v, reps), x)


def test_zero_size_result_returned_with_its_source():
  x = np.ones((2, 3), np.float32)
  compiler_harness.check(lambda v: (lax.tile(v, (1, 0)), v * 2), x)


def test_op_with_one_empty_result_is_not_skipped():
  # lax_test.py::testRngBitGeneratorReturnedKey: rng_bit_generator with a zero-size bits result
  # was treated as "empty" and its (non-empty) new key came back as zeros. It must now compile
  # through a rule, or fail with a CompileError naming the op, never return unwritten memory.
  # decompose-rng-bit-generator now computes the new key: it must equal XLA CPU's.
  key = np.array([3, 1, 4, 2], np.uint32)
  compiler_harness.check(lambda k: lax.rng_bit_generator(k, (0,)), key)


@pytest.mark.parametrize("dtype", [np.float16, jax.numpy.bfloat16, np.float32])
@pytest.mark.parametrize("shape", [(0,), (2, 0, 3)])
def test_zero_size_splat_constants(dtype, shape):
  # lax_numpy_operators_test.py::testOp_spacing_float16 on a zero-size array: a zero-size f16
  # splat constant (chlo.next_after's decomposition) made the importer reshape an empty buffer
  # into a scalar (internal compiler error).
  import jax.numpy as jnp
  x = np.ones(shape, dtype)
  if dtype == np.float16:  # (for other dtypes JAX folds it and drops the unused argument)
    compiler_harness.check(jnp.spacing, x)
  compiler_harness.check(lambda v: v + jnp.full(shape, 2, dtype), x)


def test_totalorder_compare_compiles():
  # lax_numpy_test.py::testDigitize/testHistogram (jnp.searchsorted): a TOTALORDER float compare
  # was refused; expand-total-order-compare now rewrites it (tests/test_lowering_small_gaps.py).
  import jax.numpy as jnp
  x = np.linspace(0, 1, 8, dtype=np.float32)
  compiler_harness.check(lambda a, v: jnp.searchsorted(a, v), x, x[::-1].copy())


@pytest.mark.parametrize("dimension_numbers,lhs_shape,rhs_shape,kwargs", [
    (("NC", "OI", "NC"), (3, 3), (3, 3), {}),
    (("NHWC", "HWIO", "NCHW"), (2, 7, 6, 4), (3, 2, 2, 8),
     dict(window_strides=(2, 1), padding=[(1, 2), (0, 1)], lhs_dilation=(1, 2),
          rhs_dilation=(2, 1), feature_group_count=2)),
])
def test_pred_convolution(dimension_numbers, lhs_shape, rhs_shape, kwargs):
  # lax_test.py::testConvGeneralDilated0D (dtype bool): gp_convolution takes no pred operands
  # and the program was refused at load (malformed program, internal error). XLA computes a
  # pred convolution as OR of ANDs.
  rng = np.random.default_rng(0)
  lhs, rhs = rng.random(lhs_shape) < 0.3, rng.random(rhs_shape) < 0.5
  kwargs = {"window_strides": (), "padding": [], **kwargs}
  compiler_harness.check(
      lambda x, y: lax.conv_general_dilated(x, y, dimension_numbers=dimension_numbers, **kwargs),
      lhs, rhs)


@pytest.mark.parametrize("f", [jax.numpy.sqrt, lax.rsqrt], ids=["sqrt", "rsqrt"])
def test_signed_zero_through_sqrt_and_rsqrt(f):
  # IEEE 754: sqrt(-0) = -0, rsqrt(-0) = -inf. ScalarE's `+ bias` with a zero bias made it +0.
  x = np.array([-0.0, 0.0, 4.0], np.float32)
  (actual,) = compiler_harness.run_program(compiler_harness.compile_fn(f, x), [x])
  expected = np.asarray(jax.jit(f)(jax.device_put(x, jax.devices("cpu")[0])))
  np.testing.assert_array_equal(np.signbit(actual), np.signbit(expected))
  np.testing.assert_array_equal(actual, expected)
