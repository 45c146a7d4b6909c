"""Native tiled elementwise lowerings against the JAX CPU backend, over dtypes and shapes
(sizes not divisible by 128, > 128 in every dim, 0-d, zero-size, broadcast operands)."""

import random

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import compiler_harness as harness

SHAPES = [(), (1,), (7,), (128,), (300,), (129, 130), (3, 200, 5), (0,), (4, 0, 3), (1000, 3)]
FLOATS = [np.float32, ml_dtypes.bfloat16, np.float16]
INTS = [np.int32, np.uint32, np.int8, np.int64]

ARITHMETIC = {"add": jnp.add, "subtract": jnp.subtract, "multiply": jnp.multiply,
              "maximum": jnp.maximum, "minimum": jnp.minimum}
FLOAT_ONLY_BINARY = {"divide": jnp.divide, "power": lambda a, b: jnp.abs(a) ** b,
                     "atan2": jnp.arctan2, "remainder": jnp.remainder}
INT_ONLY_BINARY = {"and": jnp.bitwise_and, "or": jnp.bitwise_or, "xor": jnp.bitwise_xor,
                   "shift_left": lambda a, b: a << (b & 7), "shift_right": lambda a, b: a >> (b & 7)}
FLOAT_UNARY = {"exp": jnp.exp, "log": lambda x: jnp.log(jnp.abs(x) + 1), "tanh": jnp.tanh,
               "logistic": jax.nn.sigmoid, "sqrt": lambda x: jnp.sqrt(jnp.abs(x)),
               "rsqrt": lambda x: jax.lax.rsqrt(jnp.abs(x) + 1), "log1p": lambda x: jnp.log1p(jnp.abs(x)),
               "expm1": jnp.expm1, "floor": jnp.floor, "ceil": jnp.ceil, "sign": jnp.sign,
               "negate": jnp.negative, "abs": jnp.abs, "sin": jnp.sin, "cos": jnp.cos,
               "is_finite": jnp.isfinite}
INT_UNARY = {"not": jnp.invert, "negate": jnp.negative, "abs": jnp.abs, "popcnt": jax.lax.population_count,
             "clz": jax.lax.clz, "sign": jnp.sign}
TRANSCENDENTAL = {"exp", "log", "tanh", "logistic", "sqrt", "rsqrt", "log1p", "expm1", "sin", "cos"}


def _data(shape, dtype, seed):
  rng = np.random.default_rng(seed)
  if np.dtype(dtype).kind in "iu":
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -1000), min(info.max, 1000), shape).astype(dtype)
  return (rng.standard_normal(shape) * 2).astype(dtype)


def _cases(table, dtypes, count):
  """A deterministic sample of (name, dtype, shape) from the product (JAX's generated cases)."""
  everything = [(n, d, s) for n in table for d in dtypes for s in SHAPES]
  sample = random.Random(0).sample(everything, min(count, len(everything)))
  # Every op at least once, on the awkward shape.
  sample += [(n, dtypes[0], (129, 130)) for n in table]
  return sample


def _scale(name, dtype):
  return 50.0 if name in TRANSCENDENTAL or name in ("power", "atan2") else 1.0


@pytest.mark.parametrize("name,dtype,shape", _cases(ARITHMETIC, FLOATS + INTS, 30))
def test_arithmetic(name, dtype, shape):
  harness.check(ARITHMETIC[name], _data(shape, dtype, 1), _data(shape, dtype, 2))


@pytest.mark.parametrize("name,dtype,shape", _cases(FLOAT_ONLY_BINARY, FLOATS, 12))
def test_float_binary(name, dtype, shape):
  harness.check(FLOAT_ONLY_BINARY[name], _data(shape, dtype, 1), _data(shape, dtype, 2) + 3,
                scale=_scale(name, dtype))


@pytest.mark.parametrize("name,dtype,shape", _cases(INT_ONLY_BINARY, INTS, 12))
def test_int_binary(name, dtype, shape):
  harness.check(INT_ONLY_BINARY[name], _data(shape, dtype, 1), _data(shape, dtype, 2))


@pytest.mark.parametrize("name,dtype,shape", _cases(FLOAT_UNARY, FLOATS, 24))
def test_float_unary(name, dtype, shape):
  harness.check(FLOAT_UNARY[name], _data(shape, dtype, 3), scale=_scale(name, dtype))


@pytest.mark.parametrize("name,dtype,shape", _cases(INT_UNARY, INTS, 12))
def test_int_unary(name, dtype, shape):
  harness.check(INT_UNARY[name], _data(shape, dtype, 3))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, ml_dtypes.bfloat16])
@pytest.mark.parametrize("direction", ["lt", "le", "gt", "ge", "eq", "ne"])
def test_compare_and_select(dtype, direction):
  a, b = _data((130, 7), dtype, 1), _data((130, 7), dtype, 2)
  compare = getattr(jnp, {"lt": "less", "le": "less_equal", "gt": "greater",
                          "ge": "greater_equal", "eq": "equal", "ne": "not_equal"}[direction])
  harness.check(lambda x, y: jnp.where(compare(x, y), x, y), a, b)


@pytest.mark.parametrize("src,dst", [(np.float32, np.int32), (np.int32, np.float32),
                                     (np.float32, ml_dtypes.bfloat16), (np.uint32, np.float32),
                                     (np.float32, np.bool_), (np.int64, np.int8)])
def test_convert(src, dst):
  harness.check(lambda x: x.astype(dst), _data((257, 3), src, 4))


def test_clamp_with_scalar_bounds():
  harness.check(lambda x: jax.lax.clamp(-1.0, x, 0.5), _data((300,), np.float32, 5))


@pytest.mark.parametrize("shape,bshape", [((128, 300), (300,)), ((129, 5), (129, 1)),
                                          ((3, 200, 5), (200, 1)), ((1000,), ())])
def test_broadcast_operands(shape, bshape):
  harness.check(lambda x, b: x * b + 1.0, _data(shape, np.float32, 1), _data(bshape, np.float32, 2))


def test_splat_immediate_on_either_side():
  harness.check(lambda x: (2.0 - x) / 3.0, _data((200,), np.float32, 6))


def test_elementwise_uses_vector_and_scalar_engines():
  from hlo_lowering.program import read_program
  program = harness.compile_fn(lambda x, y: jnp.exp(x) + y, _data((256,), np.float32, 1),
                               _data((256,), np.float32, 2))
  opcodes = {inst.opcode.name for stream in read_program(program).streams.values()
             for inst in stream}
  assert {"ACTIVATION", "TENSOR_TENSOR", "DMA_COPY"} <= opcodes


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_divide_by_a_power_of_two_is_a_multiply_with_the_same_bits(dtype):
  from hlo_lowering.program import Alu, read_program
  info = ml_dtypes.finfo(dtype)
  x = np.concatenate([_data((1000,), dtype, 7),
                      np.array([info.tiny, info.tiny * 3, info.max, -info.max, 0.0, -0.0,
                                np.inf, -np.inf, np.nan], dtype)]).astype(dtype)
  for divisor in (8.0, 0.25, 3.0):
    f = lambda x: x / np.asarray(divisor, dtype)
    harness.check(f, x)
    program = harness.compile_fn(f, x)
    # The multiply runs on VectorE (tensor_scalar) or ScalarE (a copy scaled by 1 / divisor).
    insts = [inst for stream in read_program(program).streams.values() for inst in stream]
    ops = {Alu(inst.operands["op"]) for inst in insts if inst.opcode.name == "TENSOR_SCALAR"}
    ops |= {Alu.MUL for inst in insts if inst.opcode.name == "ACTIVATION"
            and inst.operands["scale"] == 1 / divisor}
    assert ops == ({Alu.DIV} if divisor == 3.0 else {Alu.MUL})
