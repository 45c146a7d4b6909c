"""The natively lowered ops of a model's core, through JAX on trn, against the CPU backend:
elementwise arithmetic and math, compare/select/convert, broadcast_in_dim, dot_general and reduce,
over dtypes and shapes that include sizes not divisible by 128 and above 128 in every dimension."""

import itertools
import math

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from cpu_reference import assert_matches_cpu, sum_of_products_bounds

BF16 = ml_dtypes.bfloat16
FLOATS = (np.float32, BF16, np.float16)
SHAPES = ((), (1,), (7,), (129, 3), (3, 200), (130, 257), (2, 3, 129))


def _data(shape, dtype, seed, low=-3.0, high=3.0):
  rng = np.random.default_rng(seed)
  if np.dtype(dtype).kind in "iu":
    return rng.integers(max(low, np.iinfo(dtype).min), min(high, np.iinfo(dtype).max),
                        size=shape).astype(dtype)
  if np.dtype(dtype) == np.bool_:
    return rng.random(shape) < 0.5
  return rng.uniform(low, high, size=shape).astype(dtype)


BINARY = {
    "add": jnp.add, "subtract": jnp.subtract, "multiply": jnp.multiply,
    "divide": jnp.divide, "maximum": jnp.maximum, "minimum": jnp.minimum,
}


@pytest.mark.parametrize("op", sorted(BINARY))
@pytest.mark.parametrize("dtype", FLOATS + (np.int32,))
@pytest.mark.parametrize("shape", SHAPES)
def test_binary(op, dtype, shape, trn, cpu):
  if op == "divide" and np.dtype(dtype).kind == "i":
    f = lambda a, b: jax.lax.div(a, b)
    b = _data(shape, dtype, 1, 1, 9)
  else:
    f = BINARY[op]
    b = _data(shape, dtype, 1, 0.5, 3.0) if op == "divide" else _data(shape, dtype, 1)
  assert_matches_cpu(f, _data(shape, dtype, 0, -100, 100) if np.dtype(dtype).kind == "i"
                     else _data(shape, dtype, 0), b, trn=trn, cpu=cpu)


UNARY = {
    # op: (function, input range); ranges keep the results finite and well-conditioned.
    "negate": (jnp.negative, (-3, 3)), "abs": (jnp.abs, (-3, 3)), "exp": (jnp.exp, (-5, 5)),
    "log": (jnp.log, (0.01, 10)), "tanh": (jnp.tanh, (-4, 4)),
    "logistic": (jax.nn.sigmoid, (-6, 6)), "sqrt": (jnp.sqrt, (0, 10)),
    "rsqrt": (jax.lax.rsqrt, (0.05, 10)),
}
# libm differences between the simulator and XLA's CPU kernels, in output ulps.
_TRANSCENDENTAL_SCALE = {"exp": 4, "log": 4, "tanh": 8, "logistic": 4, "rsqrt": 2, "sqrt": 1}


@pytest.mark.parametrize("op", sorted(UNARY))
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", ((), (129, 3), (130, 257)))
def test_unary(op, dtype, shape, trn, cpu):
  f, (low, high) = UNARY[op]
  assert_matches_cpu(f, _data(shape, dtype, 2, low, high), trn=trn, cpu=cpu,
                     scale=_TRANSCENDENTAL_SCALE.get(op, 1))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", ((7,), (130, 257)))
def test_power(dtype, shape, trn, cpu):
  assert_matches_cpu(jnp.power, _data(shape, dtype, 3, 0.1, 3), _data(shape, dtype, 4, -2, 2),
                     trn=trn, cpu=cpu, scale=8)


@pytest.mark.parametrize("direction", ("eq", "ne", "lt", "le", "gt", "ge"))
@pytest.mark.parametrize("dtype", (np.float32, BF16, np.int32, np.uint8))
def test_compare_and_select(direction, dtype, trn, cpu):
  compare = getattr(jax.lax, direction)
  shape = (129, 130)
  a = _data(shape, dtype, 5, 0, 4).round().astype(dtype)
  b = _data(shape, dtype, 6, 0, 4).round().astype(dtype)
  assert_matches_cpu(lambda x, y: (compare(x, y), jnp.where(compare(x, y), x, y)), a, b,
                     trn=trn, cpu=cpu)


CONVERSIONS = list(itertools.permutations(
    (np.float32, BF16, np.float16, np.int32, np.int8, np.uint8, np.bool_,
     ml_dtypes.float8_e4m3fn), 2))


@pytest.mark.parametrize("src,dst", CONVERSIONS, ids=lambda t: np.dtype(t).name)
def test_convert(src, dst, trn, cpu):
  x = _data((131, 5), src, 7, -20, 120)
  assert_matches_cpu(lambda v: v.astype(dst), x, trn=trn, cpu=cpu)


@pytest.mark.parametrize("dtype", (np.float32, BF16, np.int32))
def test_broadcast_in_dim(dtype, trn, cpu):
  def f(row, col, scalar):
    return row[None, :] + col[:, None] * scalar, jnp.broadcast_to(row, (3, 130, 257))
  assert_matches_cpu(f, _data((257,), dtype, 8), _data((130,), dtype, 9),
                     _data((), dtype, 10), trn=trn, cpu=cpu)


@pytest.mark.parametrize("m,k,n", ((1, 1, 1), (7, 129, 3), (128, 128, 128), (129, 200, 300),
                                   (300, 513, 129), (64, 1, 257)))
@pytest.mark.parametrize("dtype", (np.float32, BF16))
def test_dot(m, k, n, dtype, trn, cpu):
  a, b = _data((m, k), dtype, 11, -1, 1), _data((k, n), dtype, 12, -1, 1)
  assert_matches_cpu(jnp.matmul, a, b, trn=trn, cpu=cpu,
                     bounds=sum_of_products_bounds(jnp.matmul, a, b, terms=k))


@pytest.mark.parametrize("spec,lhs,rhs", (
    ("bmk,bkn->bmn", (3, 129, 70), (3, 70, 130)),
    ("bkm,bnk->bmn", (2, 200, 5), (2, 140, 200)),
    ("mk,nk->mn", (131, 64), (257, 64)),
    ("abmk,abkn->abmn", (2, 2, 33, 17), (2, 2, 17, 9)),
))
def test_dot_general_forms(spec, lhs, rhs, trn, cpu):
  f = lambda a, b: jnp.einsum(spec, a, b)
  a, b = _data(lhs, np.float32, 13, -1, 1), _data(rhs, np.float32, 14, -1, 1)
  inputs, output = spec.split("->")
  terms = math.prod(lhs[inputs.split(",")[0].index(c)] for c in set(inputs.split(",")[0])
                    if c in inputs.split(",")[1] and c not in output)
  assert_matches_cpu(f, a, b, trn=trn, cpu=cpu, bounds=sum_of_products_bounds(f, a, b, terms=terms))


REDUCTIONS = {"sum": jnp.sum, "max": jnp.max, "min": jnp.min}


@pytest.mark.parametrize("reduction", sorted(REDUCTIONS))
@pytest.mark.parametrize("dtype", (np.float32, BF16, np.int32))
@pytest.mark.parametrize("shape,axis", (((300,), 0), ((130, 257), 0), ((130, 257), 1),
                                        ((130, 257), None), ((3, 129, 5), (0, 2)),
                                        ((2, 3, 200), -1)))
def test_reduce(reduction, dtype, shape, axis, trn, cpu):
  f = lambda x: REDUCTIONS[reduction](x, axis=axis)
  x = _data(shape, dtype, 15, -50, 50) if np.dtype(dtype).kind == "i" else _data(shape, dtype, 15)
  n = np.prod(shape) if axis is None else np.prod(
      [shape[a] for a in np.atleast_1d(axis)])
  assert_matches_cpu(f, x, trn=trn, cpu=cpu,
                     scale=float(np.sqrt(n)) if reduction == "sum" else 1.0)


@pytest.mark.parametrize("dtype,bits", ((np.float16, (0x7C37, 0xFC01, 0x7E00)),
                                        (BF16, (0x7F81, 0xFFC1, 0x7FC0)),
                                        (np.float32, (0x7F800001, 0xFFC00123, 0x7FC00000))))
def test_copies_keep_nan_payloads(dtype, bits, trn):
  """Moving data (transpose, concatenate, slice) converts nothing, so NaN payloads survive bit
  for bit. Compared with NumPy on the raw bits: XLA's CPU backend computes bf16 data movement
  through f32 and quiets bf16 payloads, which is not a property of the ops."""
  uint = {2: np.uint16, 4: np.uint32}[np.dtype(dtype).itemsize]
  raw = np.resize(np.array(bits, uint), (130, 3))
  f = lambda v: (v.T, np.concatenate([v, v[::-1]], axis=0)[1:])
  g = lambda v: (v.T, jnp.concatenate([v, v[::-1]], axis=0)[1:])
  actual = jax.device_get(jax.jit(g)(jax.device_put(raw.view(dtype), trn)))
  for a, e in zip(actual, f(raw)):
    np.testing.assert_array_equal(np.asarray(a).view(uint), e)
