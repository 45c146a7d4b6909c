"""int4 and uint4 (jnp.int4 / jnp.uint4, PJRT S4/U4) end to end: transfers both ways, every
elementwise op over every pair of 4-bit values (wrap-around, division by zero), converts,
bitcasts, reductions, dots and loops, jit and eager, each against JAX's CPU backend, which
computes them exactly as XLA does (docs/numerics.md, "int4 and uint4")."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

import compiler_harness
from cpu_reference import assert_close, on_device
from hlo_lowering.program import DType
from hlo_lowering.program.reader import read_program
from hlo_lowering.program.enums import TensorKind

FOUR_BIT = [jnp.int4, jnp.uint4]


def _all_values(dtype) -> np.ndarray:
  info = ml_dtypes.iinfo(dtype)
  return np.arange(int(info.min), int(info.max) + 1).astype(dtype)


def _all_pairs(dtype) -> tuple[np.ndarray, np.ndarray]:
  """Every (x, y) of 4-bit values, as two [16, 16] arrays."""
  values = _all_values(dtype)
  return np.repeat(values, 16).reshape(16, 16), np.tile(values, 16).reshape(16, 16)


def _assert_same(actual, expected) -> None:
  """Same dtype and shape, and the same values (compared widened: 4-bit arrays compare as
  int8)."""
  actual, expected = np.asarray(actual), np.asarray(expected)
  assert actual.dtype == expected.dtype and actual.shape == expected.shape
  wide = np.int8 if actual.dtype.itemsize == 1 and actual.dtype.kind == "V" else actual.dtype
  np.testing.assert_array_equal(actual.astype(wide), expected.astype(wide))


def _check(f, *args, trn, cpu, jit=True) -> None:
  if jit:
    expected, actual = on_device(f, cpu, *args), on_device(f, trn, *args)
  else:
    expected = f(*[jax.device_put(a, cpu) for a in args])
    actual = f(*[jax.device_put(a, trn) for a in args])
  for a, e in zip(jax.tree_util.tree_leaves(actual), jax.tree_util.tree_leaves(expected)):
    _assert_same(a, e)


@pytest.mark.parametrize("dtype", FOUR_BIT)
@pytest.mark.parametrize("shape", [(), (7,), (3, 5), (2, 3, 1)])
def test_transfers_keep_every_value(trn, dtype, shape):
  values = np.resize(_all_values(dtype), shape)
  placed = jax.device_put(values, trn)
  assert placed.dtype == dtype
  _assert_same(np.asarray(placed), values)
  # ... and a trn result comes back as the same type.
  _assert_same(np.asarray(jax.jit(lambda x: x)(placed)), values)


@pytest.mark.parametrize("dtype", FOUR_BIT)
def test_high_nibble_bits_of_host_bytes_are_ignored(trn, cpu, dtype):
  # ml_dtypes reads a 4-bit value from its byte's low nibble; bytes viewed from uint8 may carry
  # other high bits, which the program's load drops as the CPU does.
  raw = np.array([0xF7, 0x08, 0x7F, 0x80, 0x3C], np.uint8).view(dtype)
  _check(lambda x: x + x.dtype.type(1), raw, trn=trn, cpu=cpu)
  _check(lambda x: x.astype(jnp.int32), raw, trn=trn, cpu=cpu)


_BINARY = ["add", "sub", "mul", "div", "rem", "max", "min", "shift_left",
           "shift_right_arithmetic", "shift_right_logical", "bitwise_and", "bitwise_or",
           "bitwise_xor", "eq", "ne", "gt", "ge", "lt", "le"]
_UNARY = ["neg", "sign", "bitwise_not", "population_count", "clz"]


@pytest.mark.parametrize("dtype", FOUR_BIT)
@pytest.mark.parametrize("name", _BINARY)
def test_binary_op_of_every_pair_matches_cpu(trn, cpu, dtype, name):
  x, y = _all_pairs(dtype)
  _check(getattr(lax, name), x, y, trn=trn, cpu=cpu)


@pytest.mark.parametrize("dtype", FOUR_BIT)
@pytest.mark.parametrize("name", _UNARY)
def test_unary_op_of_every_value_matches_cpu(trn, cpu, dtype, name):
  _check(getattr(lax, name), _all_values(dtype), trn=trn, cpu=cpu)


@pytest.mark.parametrize("dtype", FOUR_BIT)
def test_eager_ops_wrap_as_on_cpu(trn, cpu, dtype):
  x, y = _all_pairs(dtype)
  for f in (lax.add, lax.mul, lax.sub, lax.div, lax.shift_right_logical):
    _check(f, x, y, trn=trn, cpu=cpu, jit=False)
  _check(lambda a: -a, x, trn=trn, cpu=cpu, jit=False)


_TARGETS = [jnp.int4, jnp.uint4, jnp.int8, jnp.uint8, jnp.int32, jnp.uint32, jnp.float32,
            jnp.bfloat16, jnp.float16, jnp.bool_]


@pytest.mark.parametrize("dtype", FOUR_BIT)
@pytest.mark.parametrize("target", _TARGETS)
def test_convert_from_four_bits(trn, cpu, dtype, target):
  _check(lambda x: x.astype(target), _all_values(dtype), trn=trn, cpu=cpu)


@pytest.mark.parametrize("dtype", FOUR_BIT)
@pytest.mark.parametrize("source", [jnp.int8, jnp.uint8, jnp.int32, jnp.bool_])
def test_convert_integers_to_four_bits_wraps(trn, cpu, dtype, source):
  values = np.array([-129, -100, -17, -9, -8, -1, 0, 1, 7, 8, 15, 16, 31, 127, 255, 1000])
  values = values.astype(source) if source != jnp.bool_ else values > 0
  _check(lambda x: x.astype(dtype), values, trn=trn, cpu=cpu)


@pytest.mark.parametrize("dtype", FOUR_BIT)
@pytest.mark.parametrize("source", [jnp.float32, jnp.bfloat16])
def test_convert_floats_to_four_bits_saturates(trn, cpu, dtype, source):
  values = np.array([100, -100, np.nan, np.inf, -np.inf, 7.6, -8.5, 7.5, 15.5, 16, -0.7, 3.99,
                     -3.99, 0, -0.0, 1e30], np.float32).astype(source)
  _check(lambda x: x.astype(dtype), values, trn=trn, cpu=cpu)


@pytest.mark.parametrize("source,target,shape", [
    (jnp.int4, jnp.int8, (3, 2)), (jnp.uint4, jnp.int8, (5, 2)), (jnp.int4, jnp.uint8, (2, 2)),
    (jnp.int4, jnp.int16, (3, 4)), (jnp.uint4, jnp.float16, (2, 4)),
    (jnp.int4, jnp.float32, (3, 8)), (jnp.uint4, jnp.int32, (2, 1, 8)),
    (jnp.int4, jnp.uint4, (7,)), (jnp.uint4, jnp.int4, (7,)),
    (jnp.int8, jnp.int4, (5,)), (jnp.uint8, jnp.uint4, (2, 3)), (jnp.int16, jnp.uint4, (3,)),
    (jnp.float32, jnp.int4, (2, 3)), (jnp.int32, jnp.uint4, ()),
])
def test_bitcast_convert_splits_and_joins_nibbles(trn, cpu, source, target, shape):
  # Element 0 of a 4-bit [..., n] group is the low nibble of the wider value's first byte.
  rng = np.random.default_rng(0)
  if np.dtype(source) in (np.dtype(jnp.int4), np.dtype(jnp.uint4)):
    values = rng.integers(-8 if source == jnp.int4 else 0, 8 if source == jnp.int4 else 16,
                          size=shape).astype(source)
  else:  # any bit pattern (floats included: NaN payloads travel as bits)
    nbytes = np.dtype(source).itemsize
    values = rng.integers(0, 256, size=(*shape, nbytes), dtype=np.uint8).view(source)
    values = values.reshape(shape)
  _check(lambda x: lax.bitcast_convert_type(x, target), values, trn=trn, cpu=cpu)


@pytest.mark.parametrize("dtype", FOUR_BIT)
def test_reductions_wrap_as_on_cpu(trn, cpu, dtype):
  x, _ = _all_pairs(dtype)
  zero, one = dtype(0), dtype(1)
  _check(lambda a: lax.reduce(a, zero, lax.add, (1,)), x, trn=trn, cpu=cpu)
  _check(lambda a: lax.reduce(a, one, lax.mul, (0,)), x + one, trn=trn, cpu=cpu)
  _check(lambda a: (jnp.max(a, axis=0), jnp.min(a, axis=1), jnp.argmax(a, axis=1)), x,
         trn=trn, cpu=cpu)
  _check(lambda a: lax.cumsum(a, axis=1), x, trn=trn, cpu=cpu)
  # A body of several ops wraps inside: (acc + v) then max with v.
  _check(lambda a: lax.reduce(a, zero, lambda acc, v: lax.max(acc + v, v), (1,)), x,
         trn=trn, cpu=cpu)


def test_int4_weights_converted_for_a_bf16_dot(trn, cpu):
  # Quantized inference: int4 weights dequantized to bf16 (scale per output column) and
  # multiplied with bf16 activations.
  rng = np.random.default_rng(1)
  weights = rng.integers(-8, 8, size=(64, 48)).astype(jnp.int4)
  scales = rng.uniform(0.01, 0.1, size=(48,)).astype(jnp.bfloat16)
  activations = rng.standard_normal((5, 64)).astype(jnp.bfloat16)

  def dequantized_dot(a, w, s):
    return jnp.dot(a, w.astype(jnp.bfloat16) * s)
  expected = on_device(dequantized_dot, cpu, activations, weights, scales)
  actual = on_device(dequantized_dot, trn, activations, weights, scales)
  assert_close(actual, expected)


def test_dot_of_int4_operands(trn, cpu):
  rng = np.random.default_rng(2)
  a = rng.integers(-8, 8, size=(3, 33)).astype(jnp.int4)
  b = rng.integers(-8, 8, size=(33, 5)).astype(jnp.int4)
  _check(lax.dot, a, b, trn=trn, cpu=cpu)  # an int4 result wraps
  # XLA CPU rejects an int4 dot with an int32 result (its HLO verifier refuses the convert it
  # makes); the same products of int8 copies are the exact answer.
  wide = on_device(lambda x, y: lax.dot(x, y, preferred_element_type=jnp.int32), trn, a, b)
  _assert_same(wide, on_device(lambda x, y: lax.dot(x, y, preferred_element_type=jnp.int32),
                               cpu, a.astype(np.int8), b.astype(np.int8)))


def test_loop_carrying_int4_wraps_every_iteration(trn, cpu):
  def count(x):
    return lax.fori_loop(0, 11, lambda i, acc: acc * jnp.int4(3) + x, x)
  _check(count, _all_values(jnp.int4), trn=trn, cpu=cpu)
  _check(jax.jit(count), _all_values(jnp.int4), trn=trn, cpu=cpu, jit=False)


def test_program_declares_int4_buffers_and_computes_in_int8():
  values = _all_values(jnp.int4)
  program = read_program(compiler_harness.compile_code(
      compiler_harness.artifact(lambda x: (x * x, x.astype(jnp.uint4)), values)))
  table = {(t.kind, t.index): t for t in program.tensors
           if t.kind in (TensorKind.PARAMETER, TensorKind.OUTPUT)}
  declared = {key: t.table_dtype_shape[0] for key, t in table.items()}
  assert declared == {(TensorKind.PARAMETER, 0): DType.S4, (TensorKind.OUTPUT, 0): DType.S4,
                      (TensorKind.OUTPUT, 1): DType.U4}
  assert {t.dtype for t in table.values()} <= {DType.S8, DType.U8}


def test_int2_is_refused_with_a_widening_hint(trn):
  narrow = jax.jit(lambda x: (x.astype(jnp.int2) + 1).astype(jnp.int32))
  with pytest.raises(Exception, match=r"element type i2 \(int2\): NeuronCores have no 2-bit "
                     r"integers .*widen to int8 \(x.astype\(jnp.int8\)\)"):
    narrow(jax.device_put(np.arange(5, dtype=np.int32), trn))
  with pytest.raises(Exception, match=r"INVALID_ARGUMENT: NeuronCores have no s2 type"):
    jax.device_put(np.zeros(3, jnp.int2), trn)
