"""GpSimd general-purpose lowerings (data movement, iota, bitcast, reduce, integer dot) against
the JAX CPU backend."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import compiler_harness as harness


def _data(shape, dtype=np.float32, seed=0):
  rng = np.random.default_rng(seed)
  if np.dtype(dtype).kind in "iu":
    return rng.integers(0, 100, shape).astype(dtype)
  return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("shape,perm", [((130, 129), (1, 0)), ((2, 3, 200), (2, 0, 1)),
                                        ((5,), (0,)), ((0, 3), (1, 0))])
@pytest.mark.parametrize("dtype", [np.float32, np.int8, ml_dtypes.bfloat16])
def test_transpose(shape, perm, dtype):
  harness.check(lambda x: jnp.transpose(x, perm), _data(shape, dtype))


def test_slice_reverse_concatenate():
  x = _data((300, 130))
  harness.check(lambda x: x[3:290:7, ::-2], x)
  harness.check(lambda x: jnp.flip(x, 0), x)
  harness.check(lambda x: jnp.concatenate([x, x[:5] * 2, x[:0]], axis=0), x)


@pytest.mark.parametrize("config", [[(1, 2, 0), (0, 0, 1)], [(-1, 3, 2), (2, -2, 0)],
                                    [(0, 0, 0), (130, 1, 0)]])
def test_pad(config):
  harness.check(lambda x: jax.lax.pad(x, jnp.float32(-7.0), config), _data((5, 9)))


def test_pad_with_runtime_value():
  harness.check(lambda x, v: jax.lax.pad(x, v, [(2, 1, 1)]), _data((6,)), np.float32(3.5))


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.float32])
def test_iota(dtype):
  harness.check(lambda x: x + jax.lax.broadcasted_iota(dtype, (129, 3), 0), _data((129, 3), dtype))


def test_bitcast_convert():
  harness.check(lambda x: jax.lax.bitcast_convert_type(x, jnp.uint32), _data((300,)))
  harness.check(lambda x: jax.lax.bitcast_convert_type(x[1:], jnp.uint8), _data((5,)))


@pytest.mark.parametrize("reducer", [jnp.sum, jnp.max, jnp.min, jnp.prod])
@pytest.mark.parametrize("axis", [0, 1, (0, 2), None])
def test_reduce(reducer, axis):
  harness.check(lambda x: reducer(x, axis=axis), _data((130, 4, 3)) * 0.5, scale=10)


def test_reduce_bool_and_int():
  harness.check(lambda x: (jnp.all(x > 10, axis=1), jnp.any(x > 90, axis=0)),
                _data((20, 30), np.int32))
  harness.check(lambda x: jnp.sum(x, axis=0), _data((300, 2), np.int32))


def test_reduce_over_empty_dim():
  harness.check(lambda x: jnp.sum(x, axis=1), _data((4, 0)))


@pytest.mark.parametrize("dtype", [np.int32, np.int8])
def test_integer_dot(dtype):
  harness.check(lambda a, b: jnp.matmul(a, b, preferred_element_type=jnp.int32),
                _data((3, 40, 17), dtype), _data((3, 17, 9), dtype))


def test_float_dot_general_forms():
  harness.check(lambda a, b: jnp.einsum("bkm,nbk->bmn", a, b), _data((2, 8, 5)), _data((3, 2, 8)),
                scale=10)
  harness.check(lambda a, b: a @ b, _data((130, 70)), _data((70,)), scale=10)
