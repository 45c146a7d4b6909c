"""Hand-built programs through the builder and the simulator, checked against numpy: DMA access
patterns, TensorE, VectorE/ScalarE ALU numerics per compute domain, dtype conversions (bit-exact
against ml_dtypes), and the GpSimd general-purpose ops."""

import ml_dtypes
import numpy as np
import pytest

from hlo_lowering.program import (Alu, DType, HbmAP, Memory, ProgramBuilder, Scalar, TileAP)
from compiler_harness import finish

_native = pytest.importorskip("jax_trn._native")
rng = np.random.default_rng(0)


def run(builder, *inputs):
  outputs, profile = _native.run_program(finish(builder), list(inputs))
  return outputs


def tile_op(inputs, out_dtype, emit, out_free=None):
  """DMAs each [P, F] input into SBUF, calls emit(b, dst_tile, src_tiles), DMAs dst out."""
  b = ProgramBuilder()
  srcs, offset = [], 0
  for i, x in enumerate(inputs):
    dtype = DType.from_numpy(x.dtype)
    t = b.tensor("parameter", dtype, x.shape, index=i, name=f"x{i}")
    tile = TileAP.dense(Memory.SBUF, dtype, 0, x.shape[0], offset, x.shape[1:])
    offset += 4096
    b.dma_copy(i, tile, HbmAP.dense(t, x.shape))
    srcs.append(tile)
  p = inputs[0].shape[0]
  free = out_free if out_free is not None else inputs[0].shape[1:]
  y = b.tensor("output", out_dtype, (p,) + tuple(free), index=0, name="y")
  dst = TileAP.dense(Memory.SBUF, out_dtype, 0, p, offset, free)
  emit(b, dst, srcs)
  b.dma_copy(15, HbmAP.dense(y, (p,) + tuple(free)), dst)
  return run(b, *inputs)[0]


# --- DMA ------------------------------------------------------------------------------------

def test_dma_roundtrip_with_transpose_broadcast_and_reverse():
  x = rng.standard_normal((8, 16)).astype(np.float32)
  b = ProgramBuilder()
  src = b.tensor("parameter", DType.F32, (8, 16), index=0, name="x")
  out_t = b.tensor("output", DType.F32, (16, 8), index=0, name="xt")
  out_b = b.tensor("output", DType.F32, (4, 16), index=1, name="bcast")
  out_r = b.tensor("output", DType.F32, (8, 16), index=2, name="rev")
  tile = TileAP.dense(Memory.SBUF, DType.F32, 0, 16, 0, (8,))
  # Transposing load: partition = column of x, free = row of x.
  b.dma_copy(0, tile, HbmAP(src, 0, ((1, 16), (16, 8))))
  b.dma_copy(1, HbmAP.dense(out_t, (16, 8)), tile)
  b.dma_copy(2, HbmAP.dense(out_b, (4, 16)), HbmAP(src, 16 * 3, ((0, 4), (1, 16))))
  b.dma_copy(3, HbmAP.dense(out_r, (8, 16)), HbmAP(src, 8 * 16 - 1, ((-16, 8), (-1, 16))))
  xt, bcast, rev = run(b, x)
  np.testing.assert_array_equal(xt, x.T)
  np.testing.assert_array_equal(bcast, np.broadcast_to(x[3], (4, 16)))
  np.testing.assert_array_equal(rev, x[::-1, ::-1])


def test_dma_strided_tile_and_conversion():
  x = rng.standard_normal((32, 20)).astype(np.float32)
  b = ProgramBuilder()
  src = b.tensor("parameter", DType.F32, (32, 20), index=0)
  out = b.tensor("output", DType.BF16, (32, 5), index=0)
  tile = TileAP.dense(Memory.SBUF, DType.F32, 32, 32, 100, (20,))
  b.dma_copy(0, tile, HbmAP.dense(src, (32, 20)))
  every_fourth = TileAP(Memory.SBUF, DType.F32, 32, 32, 100, ((4, 5),))
  b.dma_copy(1, HbmAP.dense(out, (32, 5)), every_fourth)
  (y,) = run(b, x)
  np.testing.assert_array_equal(y.view(np.uint16), x[:, ::4].astype(ml_dtypes.bfloat16).view(np.uint16))


# --- TensorE --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [DType.F32, DType.BF16])
def test_matmul_accumulates_over_k_tiles(dtype):
  m, k, n, ktiles = 64, 128, 96, 3
  a = rng.standard_normal((m, k * ktiles)).astype(dtype.numpy)
  w = rng.standard_normal((k * ktiles, n)).astype(dtype.numpy)
  b = ProgramBuilder()
  ta = b.tensor("parameter", dtype, a.shape, index=0)
  tw = b.tensor("parameter", dtype, w.shape, index=1)
  out = b.tensor("output", DType.F32, (m, n), index=0)
  psum = TileAP.dense(Memory.PSUM, DType.F32, 0, m, 2048, (n,))
  for i in range(ktiles):
    stationary = TileAP.dense(Memory.SBUF, dtype, 0, k, i * 1024, (m,))
    moving = TileAP.dense(Memory.SBUF, dtype, 0, k, 8192 + i * 1024, (n,))
    b.dma_copy(0, stationary, HbmAP(ta, i * k, ((1, k), (k * ktiles, m))))  # a^T tile
    b.dma_copy(1, moving, HbmAP(tw, i * k * n, ((n, k), (1, n))))
    b.matmul(psum, stationary, moving, start=i == 0, stop=i == ktiles - 1)
  sb = TileAP.dense(Memory.SBUF, DType.F32, 0, m, 16384, (n,))
  b.tensor_copy(sb, psum)
  b.dma_copy(2, HbmAP.dense(out, (m, n)), sb)
  (y,) = run(b, a, w)
  expected = a.astype(np.float64) @ w.astype(np.float64)
  np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-3)


def test_transpose_on_tensor_engine():
  x = rng.standard_normal((64, 32)).astype(np.float32)

  def emit(b, dst, srcs):
    psum = TileAP.dense(Memory.PSUM, DType.F32, 0, 32, 0, (64,))
    b.transpose(psum, srcs[0])
    b.tensor_copy(dst, psum)

  b = ProgramBuilder()
  t = b.tensor("parameter", DType.F32, (64, 32), index=0)
  y = b.tensor("output", DType.F32, (32, 64), index=0)
  src = TileAP.dense(Memory.SBUF, DType.F32, 0, 64, 0, (32,))
  dst = TileAP.dense(Memory.SBUF, DType.F32, 0, 32, 4096, (64,))
  b.dma_copy(0, src, HbmAP.dense(t, (64, 32)))
  emit(b, dst, [src])
  b.dma_copy(1, HbmAP.dense(y, (32, 64)), dst)
  np.testing.assert_array_equal(run(b, x)[0], x.T)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_same_dtype_transpose_keeps_bits_except_quieting_a_bf16_nan(dtype):
  # A transpose is defined through fp32 values: every f32 pattern (signalling NaNs too) comes back
  # unchanged, a bf16 NaN comes back with its quiet bit set. Every bf16 pattern is tried.
  bits = np.uint32 if dtype == np.float32 else np.uint16
  patterns = np.arange(2**16, dtype=np.uint32)
  if dtype == np.float32:
    patterns = (patterns << 16) | 1  # every sign, exponent and high mantissa, signalling NaNs
  x = patterns.astype(bits).view(dtype).reshape(128, 512)
  code = DType.from_numpy(x.dtype)
  b = ProgramBuilder()
  t = b.tensor("parameter", code, (128, 512), index=0)
  y = b.tensor("output", code, (4, 128, 128), index=0)
  src = TileAP.dense(Memory.SBUF, code, 0, 128, 0, (512,))
  b.dma_copy(0, src, HbmAP.dense(t, (128, 512)))
  for j in range(4):  # [128, 128] column blocks of the source, each through PSUM
    block = TileAP.dense(Memory.SBUF, code, 0, 128, 128 * j * x.itemsize, (128,))
    psum = TileAP.dense(Memory.PSUM, code, 0, 128, 512 * j, (128,))
    out = TileAP.dense(Memory.SBUF, code, 0, 128, 4096 + 512 * j, (128,))
    b.transpose(psum, block)
    b.tensor_copy(out, psum)  # equal dtypes: bit for bit
    b.dma_copy(1, HbmAP.dense(y, (128, 128), offset=128 * 128 * j), out)
  out = run(b, x)[0].view(bits)
  expected = np.stack([x[:, 128 * j:128 * (j + 1)].T for j in range(4)]).view(bits)
  if dtype != np.float32:
    nan = (expected & 0x7FFF) > 0x7F80
    expected = np.where(nan, expected | 0x0040, expected)
  np.testing.assert_array_equal(out, expected)


# --- VectorE / ScalarE numerics -------------------------------------------------------------

FLOAT_BINARY = {Alu.ADD: np.add, Alu.SUB: np.subtract, Alu.MUL: np.multiply, Alu.DIV: np.divide,
                Alu.MAX: np.maximum, Alu.MIN: np.minimum, Alu.REM: np.fmod, Alu.POW: np.power,
                Alu.ATAN2: np.arctan2, Alu.EQ: np.equal, Alu.NE: np.not_equal, Alu.LT: np.less,
                Alu.LE: np.less_equal, Alu.GT: np.greater, Alu.GE: np.greater_equal}


@pytest.mark.parametrize("op", list(FLOAT_BINARY), ids=lambda o: o.name)
def test_float_binary(op):
  a = rng.uniform(0.5, 4, (16, 32)).astype(np.float32)
  c = rng.uniform(0.5, 4, (16, 32)).astype(np.float32)
  a[0, :3] = [np.nan, 1.0, -0.0]
  c[0, :3] = [1.0, np.nan, 0.0]
  y = tile_op([a, c], DType.F32, lambda b, d, s: b.tensor_tensor(op, d, s[0], s[1]))
  with np.errstate(all="ignore"):
    expected = FLOAT_BINARY[op](a, c).astype(np.float32)
  np.testing.assert_allclose(y, expected, rtol=2e-6, equal_nan=True)


FLOAT_UNARY = {Alu.NEG: np.negative, Alu.ABS: np.abs, Alu.EXP: np.exp, Alu.EXPM1: np.expm1,
               Alu.LOG: np.log, Alu.LOG1P: np.log1p, Alu.TANH: np.tanh,
               Alu.LOGISTIC: lambda x: 1 / (1 + np.exp(-x)), Alu.SQRT: np.sqrt,
               Alu.RSQRT: lambda x: 1 / np.sqrt(x), Alu.CBRT: np.cbrt, Alu.SIN: np.sin,
               Alu.COS: np.cos, Alu.TAN: np.tan, Alu.FLOOR: np.floor, Alu.CEIL: np.ceil,
               Alu.ROUND_NEAREST_EVEN: np.rint,
               Alu.ROUND_NEAREST_AFZ: lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5),
               Alu.SIGN: np.sign, Alu.IS_FINITE: np.isfinite, Alu.RECIPROCAL: np.reciprocal,
               Alu.COPY: lambda x: x}


@pytest.mark.parametrize("op", list(FLOAT_UNARY), ids=lambda o: o.name)
def test_float_unary(op):
  x = rng.uniform(0.1, 3, (8, 32)).astype(np.float32)
  x[0, :4] = [0.5, 1.5, 2.5, -2.5]
  y = tile_op([x], DType.F32, lambda b, d, s: b.tensor_unary(op, d, s[0]))
  with np.errstate(invalid="ignore"):
    expected = FLOAT_UNARY[op](x.astype(np.float64))
  np.testing.assert_allclose(y, expected, rtol=3e-6, atol=1e-7)


def test_erf():
  import math
  x = rng.uniform(-3, 3, (4, 16)).astype(np.float32)
  y = tile_op([x], DType.F32, lambda b, d, s: b.tensor_unary(Alu.ERF, d, s[0]))
  np.testing.assert_allclose(y, np.vectorize(math.erf)(x.astype(np.float64)), rtol=2e-6, atol=1e-7)


INT_MIN32 = -2**31


def _s32_expected(op, a, c):
  a64, c64 = a.astype(np.int64), c.astype(np.int64)
  out = []
  for x, y in zip(a64.ravel().tolist(), c64.ravel().tolist()):
    if op == Alu.DIV:
      r = -1 if y == 0 else (x if (x == INT_MIN32 and y == -1) else int(x / y))
    elif op == Alu.REM:
      r = x if y == 0 else (0 if y == -1 else x - int(x / y) * y)
    elif op == Alu.SHIFT_LEFT:
      r = 0 if not 0 <= y < 32 else x << y
    elif op == Alu.SHIFT_RIGHT_LOGICAL:
      r = 0 if not 0 <= y < 32 else (x & 0xFFFFFFFF) >> y
    elif op == Alu.SHIFT_RIGHT_ARITHMETIC:
      r = x >> min(y, 31) if y >= 0 else x >> 31
    elif op == Alu.POW:
      r = (1 if x == 1 else ((-1) ** (y & 1) if x == -1 else 0)) if y < 0 else pow(x, y, 2**32)
    else:
      r = {Alu.ADD: x + y, Alu.SUB: x - y, Alu.MUL: x * y, Alu.MAX: max(x, y),
           Alu.MIN: min(x, y), Alu.AND: x & y, Alu.OR: x | y, Alu.XOR: x ^ y,
           Alu.EQ: int(x == y), Alu.LT: int(x < y), Alu.GE: int(x >= y)}[op]
    out.append(r)
  return np.array([(v + 2**31) % 2**32 - 2**31 for v in out], np.int64).astype(np.int32).reshape(a.shape)


@pytest.mark.parametrize("op", [Alu.ADD, Alu.SUB, Alu.MUL, Alu.DIV, Alu.REM, Alu.MAX, Alu.MIN,
                                Alu.AND, Alu.OR, Alu.XOR, Alu.SHIFT_LEFT, Alu.SHIFT_RIGHT_LOGICAL,
                                Alu.SHIFT_RIGHT_ARITHMETIC, Alu.POW, Alu.EQ, Alu.LT, Alu.GE],
                         ids=lambda o: o.name)
def test_s32_binary_follows_xla(op):
  a = rng.integers(-1000, 1000, (4, 16)).astype(np.int32)
  c = rng.integers(-40, 40, (4, 16)).astype(np.int32)
  a[0, :6] = [INT_MIN32, INT_MIN32, 7, -7, 2**31 - 1, 5]
  c[0, :6] = [-1, 0, 0, 33, 2, -3]
  if op == Alu.POW:
    c = np.clip(c, -3, 5)
  y = tile_op([a, c], DType.S32, lambda b, d, s: b.tensor_tensor(op, d, s[0], s[1]))
  np.testing.assert_array_equal(y, _s32_expected(op, a, c))


def test_unsigned_and_bit_ops():
  a = np.array([[0, 1, 0x80000000, 0xFFFFFFFF, 12345, 7]], np.uint32)
  c = np.array([[0, 3, 31, 32, 2, 0]], np.uint32)
  div = tile_op([a, c], DType.U32, lambda b, d, s: b.tensor_tensor(Alu.DIV, d, s[0], s[1]))
  np.testing.assert_array_equal(div, [[0xFFFFFFFF, 0, 0x80000000 // 31, 0xFFFFFFFF // 32, 6172, 0xFFFFFFFF]])
  sra = tile_op([a, c], DType.U32,
                lambda b, d, s: b.tensor_tensor(Alu.SHIFT_RIGHT_ARITHMETIC, d, s[0], s[1]))
  np.testing.assert_array_equal(sra, [[0, 0, 0xFFFFFFFF, 0xFFFFFFFF, 3086, 7]])
  pop = tile_op([a], DType.U32, lambda b, d, s: b.tensor_unary(Alu.POPCNT, d, s[0]))
  np.testing.assert_array_equal(pop, [[0, 1, 1, 32, 6, 3]])
  clz = tile_op([a], DType.U32, lambda b, d, s: b.tensor_unary(Alu.CLZ, d, s[0]))
  np.testing.assert_array_equal(clz, [[32, 31, 0, 0, 18, 29]])
  s = np.array([[-1, 0, 5, INT_MIN32]], np.int32)
  np.testing.assert_array_equal(
      tile_op([s], DType.S32, lambda b, d, x: b.tensor_unary(Alu.POPCNT, d, x[0])), [[32, 0, 2, 1]])
  np.testing.assert_array_equal(
      tile_op([s], DType.S32, lambda b, d, x: b.tensor_unary(Alu.NOT, d, x[0])), ~s)
  np.testing.assert_array_equal(
      tile_op([s], DType.S32, lambda b, d, x: b.tensor_unary(Alu.ABS, d, x[0])), np.abs(s))
  p = np.array([[True, False, True]])
  np.testing.assert_array_equal(
      tile_op([p], DType.PRED, lambda b, d, x: b.tensor_unary(Alu.NOT, d, x[0])), ~p)


SPECIALS = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-8, 1e-40, 65504, 65520,
                     448, 464, 480, 57344, 61440, 3.4e38, 1.00390625, 1.01171875, -1.99],
                    np.float32)


@pytest.mark.parametrize("dtype", [DType.BF16, DType.F16, DType.F8E4M3FN, DType.F8E5M2])
def test_float_narrowing_is_bit_exact(dtype):
  x = np.concatenate([SPECIALS, rng.standard_normal(236).astype(np.float32) * 100,
                      rng.standard_normal(256).astype(np.float32) * 1e-3]).reshape(4, 128)
  y = tile_op([x], dtype, lambda b, d, s: b.tensor_copy(d, s[0]))
  bits = np.uint8 if dtype.itemsize == 1 else np.uint16
  with np.errstate(all="ignore"):
    expected = x.astype(dtype.numpy)
  np.testing.assert_array_equal(y.view(bits), expected.view(bits))
  back = tile_op([expected], DType.F32, lambda b, d, s: b.tensor_copy(d, s[0]))
  np.testing.assert_array_equal(back, expected.astype(np.float32))


def test_float_to_int_saturates_and_int_narrowing_wraps():
  x = np.array([[1.9, -1.9, 300.0, -300.0, np.nan, np.inf, -np.inf, 127.5]], np.float32)
  y = tile_op([x], DType.S8, lambda b, d, s: b.tensor_copy(d, s[0]))
  np.testing.assert_array_equal(y, [[1, -1, 127, -128, 0, 127, -128, 127]])
  u = tile_op([x], DType.U8, lambda b, d, s: b.tensor_copy(d, s[0]))
  np.testing.assert_array_equal(u, [[1, 0, 255, 0, 0, 255, 0, 127]])
  i = np.array([[300, -129, 65535, -1]], np.int32)
  np.testing.assert_array_equal(tile_op([i], DType.S8, lambda b, d, s: b.tensor_copy(d, s[0])),
                                i.astype(np.int8))
  np.testing.assert_array_equal(tile_op([i], DType.PRED, lambda b, d, s: b.tensor_copy(d, s[0])),
                                i != 0)


def test_tensor_scalar_immediate_tile_and_reverse():
  x = rng.uniform(1, 2, (8, 16)).astype(np.float32)
  col = rng.uniform(1, 2, (8, 1)).astype(np.float32)
  y = tile_op([x], DType.F32, lambda b, d, s: b.tensor_scalar(Alu.SUB, d, s[0],
                                                               Scalar(DType.F32, 0.5)))
  np.testing.assert_array_equal(y, x - np.float32(0.5))
  y = tile_op([x], DType.F32, lambda b, d, s: b.tensor_scalar(Alu.SUB, d, s[0],
                                                               Scalar(DType.F32, 0.5), reverse=True))
  np.testing.assert_array_equal(y, np.float32(0.5) - x)
  y = tile_op([x, col], DType.F32, lambda b, d, s: b.tensor_scalar(Alu.DIV, d, s[0], s[1]))
  np.testing.assert_array_equal(y, x / col)


@pytest.mark.parametrize("op,fn", [(Alu.ADD, np.sum), (Alu.MAX, np.max), (Alu.MIN, np.min)])
def test_tensor_reduce(op, fn):
  x = rng.standard_normal((16, 3, 10)).astype(np.float32)
  y = tile_op([x], DType.F32, lambda b, d, s: b.tensor_reduce(op, d, s[0]), out_free=(1,))
  np.testing.assert_allclose(y[:, 0], fn(x.reshape(16, -1), axis=1), rtol=1e-5)
  i = rng.integers(0, 2**16, (4, 8)).astype(np.int32)
  y = tile_op([i], DType.S32, lambda b, d, s: b.tensor_reduce(Alu.XOR, d, s[0]), out_free=(1,))
  np.testing.assert_array_equal(y[:, 0], np.bitwise_xor.reduce(i, axis=1))


def test_tensor_ternary_select_and_clamp():
  p = rng.integers(0, 2, (4, 8)).astype(np.bool_)
  a = rng.standard_normal((4, 8)).astype(np.float32)
  c = rng.standard_normal((4, 8)).astype(np.float32)
  y = tile_op([p, a, c], DType.F32, lambda b, d, s: b.tensor_ternary(Alu.SELECT, d, *s))
  np.testing.assert_array_equal(y, np.where(p, a, c))
  lo = np.full((4, 8), -0.5, np.float32)
  hi = np.full((4, 8), 0.5, np.float32)
  y = tile_op([lo, a, hi], DType.F32, lambda b, d, s: b.tensor_ternary(Alu.CLAMP, d, *s))
  np.testing.assert_array_equal(y, np.clip(a, -0.5, 0.5))


def test_activation_scale_and_bias():
  x = rng.standard_normal((8, 32)).astype(np.float32)
  bias = rng.standard_normal((8, 1)).astype(np.float32)
  y = tile_op([x], DType.F32, lambda b, d, s: b.activation(Alu.TANH, d, s[0], scale=2.0,
                                                             bias=Scalar(DType.F32, 0.25)))
  np.testing.assert_allclose(y, np.tanh(x * 2 + 0.25), rtol=2e-6, atol=1e-7)
  y = tile_op([x, bias], DType.BF16,
              lambda b, d, s: b.activation(Alu.EXP, d, s[0], scale=0.5, bias=s[1]))
  expected = np.exp(x * np.float32(0.5) + bias).astype(np.float32)
  np.testing.assert_allclose(y.astype(np.float32), expected, rtol=1e-2)


# --- GpSimd ---------------------------------------------------------------------------------

def test_gp_ops():
  x = rng.standard_normal((3, 4, 5)).astype(np.float64)
  w = rng.standard_normal((3, 5, 2)).astype(np.float64)
  b = ProgramBuilder()
  tx = b.tensor("parameter", DType.F64, x.shape, index=0)
  tw = b.tensor("parameter", DType.F64, w.shape, index=1)
  o_ew = b.tensor("output", DType.F64, x.shape, index=0)
  o_copy = b.tensor("output", DType.F32, (5, 4, 3), index=1)
  o_fill = b.tensor("output", DType.S32, (2, 3), index=2)
  o_iota = b.tensor("output", DType.F32, (2, 3), index=3)
  o_bits = b.tensor("output", DType.U64, x.shape, index=4)
  o_red = b.tensor("output", DType.F64, (3,), index=5)
  o_mm = b.tensor("output", DType.F64, (3, 4, 2), index=6)
  o_sel = b.tensor("output", DType.F64, x.shape, index=7)
  tmp = b.tensor("temporary", DType.PRED, x.shape)
  full = HbmAP.dense(tx, x.shape)
  b.gp_elementwise(Alu.EXP, HbmAP.dense(o_ew, x.shape), [full])
  b.gp_copy(HbmAP.dense(o_copy, (5, 4, 3)), HbmAP(tx, 0, ((1, 5), (5, 4), (20, 3))))
  b.gp_fill(HbmAP.dense(o_fill, (2, 3)), Scalar(DType.S32, -7))
  b.gp_iota(HbmAP.dense(o_iota, (2, 3)), 1)
  b.gp_bitcast(o_bits, tx)
  b.gp_reduce(Alu.ADD, HbmAP.dense(o_red, (3,)), full, 2, Scalar(DType.F64, 1.0))
  b.gp_batch_matmul(HbmAP.dense(o_mm, (3, 4, 2)), full, HbmAP.dense(tw, w.shape))
  zero = HbmAP(tx, 0, ((0, 3), (0, 4), (0, 5)))  # x[0,0,0] broadcast
  b.gp_elementwise(Alu.GT, HbmAP.dense(tmp, x.shape), [full, zero])
  b.gp_elementwise(Alu.SELECT, HbmAP.dense(o_sel, x.shape),
                   [HbmAP.dense(tmp, x.shape), full, zero])
  ew, cp, fill, iota, bits, red, mm, sel = run(b, x, w)
  np.testing.assert_allclose(ew, np.exp(x), rtol=1e-15)
  np.testing.assert_array_equal(cp, x.transpose(2, 1, 0).astype(np.float32))
  np.testing.assert_array_equal(fill, np.full((2, 3), -7))
  np.testing.assert_array_equal(iota, np.broadcast_to(np.arange(3, dtype=np.float32), (2, 3)))
  np.testing.assert_array_equal(bits, x.view(np.uint64))
  np.testing.assert_allclose(red, 1 + x.sum(axis=(1, 2)), rtol=1e-14)
  np.testing.assert_allclose(mm, x @ w, rtol=1e-13)
  np.testing.assert_array_equal(sel, np.where(x > x[0, 0, 0], x, x[0, 0, 0]))


def test_gp_integer_ops():
  a = np.array([[5, -7, INT_MIN32, 9]], np.int32)
  c = np.array([[0, 2, -1, -2]], np.int32)
  b = ProgramBuilder()
  ta = b.tensor("parameter", DType.S32, a.shape, index=0)
  tc = b.tensor("parameter", DType.S32, c.shape, index=1)
  out = b.tensor("output", DType.S32, a.shape, index=0)
  red = b.tensor("output", DType.S64, (1,), index=1)
  b.gp_elementwise(Alu.REM, HbmAP.dense(out, a.shape), [HbmAP.dense(ta, a.shape),
                                                      HbmAP.dense(tc, c.shape)])
  b.gp_reduce(Alu.MUL, HbmAP.dense(red, (1,)), HbmAP.dense(tc, (4,)), 1, Scalar(DType.S64, 3))
  rem, product = run(b, a, c)
  np.testing.assert_array_equal(rem, [[5, -1, 0, 1]])
  np.testing.assert_array_equal(product, [0])
