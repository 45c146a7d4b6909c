"""The float64 bit patterns of values held as float32 (narrow-float64's every-float64 scope).

Where float64 is computed as float32, a `bitcast_convert` between f64 and a 64-bit integer keeps
the meaning it has for the value the program holds:

- integer bits → f64: the f32 nearest the float64 those bits denote (round to nearest even, as a
  convert from f64 rounds: beyond f32's range ±inf, below it f32's subnormals, then ±0; a NaN
  keeps its sign and the top 23 bits of its payload, quieted, as x86's cvtsd2ss keeps them);
- f64 → integer bits: the bits of the f32 value widened exactly to float64 (a NaN quieted, as
  cvtss2sd quiets it).

Both are integer arithmetic on u64 lanes (shifts, masks, compares, selects, one exact small
integer convert), so they are exact on every engine. JAX's float64 random numbers are built this
way (bits → [1, 2) → minus 1), so `jax.random` with x64 runs under the policy; with 52 random
mantissa bits rounded to 24, a uniform draw in [0, 1) is 1.0 with probability 2⁻²⁵.
"""

from __future__ import annotations

from hlo_lowering.ir import Value
from hlo_lowering.passes.expansion import Emitter
from hlo_lowering.program import DType

U64, U32, F32 = DType.U64, DType.U32, DType.F32
_F64_MANTISSA = (1 << 52) - 1
_F32_INF, _F32_QUIET_NAN = 0x7F800000, 0x7FC00000
_F32_FIRST_NORMAL = 1023 - 126  # the f64 biased exponent of 2**-126
_F64_QUIET_BIT = 1 << 51


class _Lanes:
  """u64 arithmetic on one tensor shape."""

  def __init__(self, e: Emitter, shape):
    self.e, self.shape = e, shape

  def k(self, value: int) -> Value:
    return self.e.splat(value, U64, self.shape)

  def op(self, name: str, a: Value, b: Value | int) -> Value:
    return self.e.binary_splat(name, a, b) if isinstance(b, int) else self.e.binary(name, a, b)

  def shr(self, a: Value, b: Value | int) -> Value:
    return self.op("shift_right_logical", a, b)

  def shl(self, a: Value, b: Value | int) -> Value:
    return self.op("shift_left", a, b)

  def cmp(self, direction: str, a: Value, b: Value | int) -> Value:
    return self.e.compare(direction, a, self.k(b) if isinstance(b, int) else b, "UNSIGNED")

  def convert(self, v: Value, dtype: DType) -> Value:
    return self.e.emit("stablehlo.convert", [v], v.shape, dtype)


def _round_up(u: _Lanes, value: Value, shift: Value | int) -> Value:
  """1 where value >> shift rounds up to nearest even (shift in 1..63), else 0."""
  one = u.k(1)
  dropped = u.op("and", value, u.op("subtract", u.shl(one, shift), one))
  half = u.shl(one, u.op("subtract", shift, one) if isinstance(shift, Value) else shift - 1)
  odd = u.cmp("NE", u.op("and", u.shr(value, shift), 1), 0)
  tie_to_odd = u.e.binary("and", u.cmp("EQ", dropped, half), odd)
  up = u.e.binary("or", u.cmp("GT", dropped, half), tie_to_odd)
  return u.e.select(up, one, u.k(0))


def _is_nan(u: _Lanes, exponent: Value, mantissa: Value) -> Value:
  """Whether float64 fields (biased exponent, mantissa bits anywhere below it) make a NaN."""
  return u.e.binary("and", u.cmp("EQ", exponent, 0x7FF), u.cmp("NE", mantissa, 0))


def float32_of_float64_bits(e: Emitter, bits: Value) -> Value:
  """The f32 nearest the float64 that the u64/s64 `bits` denote."""
  u = _Lanes(e, bits.shape)
  b = bits if bits.dtype == U64 else e.bitcast(bits, U64)
  sign = u.shl(u.shr(b, 63), 31)
  exponent = u.op("and", u.shr(b, 52), 0x7FF)
  mantissa = u.op("and", b, _F64_MANTISSA)
  # f32's normal range and beyond: exponent and top mantissa bits side by side, so rounding up
  # carries into the exponent and past f32's largest finite value lands on inf.
  packed = u.op("or", u.shl(u.op("subtract", exponent, _F32_FIRST_NORMAL - 1), 23),
                u.shr(mantissa, 29))
  normal = u.op("minimum", u.op("add", packed, _round_up(u, mantissa, 29)), _F32_INF)
  # Below it: the significand (implicit bit unless f64-subnormal) shifted onto f32's subnormal
  # quantum 2**-149, whose bit pattern is the rounded integer itself (2**23 is 2**-126).
  significand = e.select(u.cmp("EQ", exponent, 0), mantissa,
                         u.op("or", mantissa, 1 << 52))
  shift = u.op("minimum", u.op("subtract", u.k(1075 - 149),
                               u.op("maximum", exponent, 1)), 63)
  subnormal = u.op("add", u.shr(significand, shift), _round_up(u, significand, shift))
  small = e.select(u.cmp("LT", exponent, _F32_FIRST_NORMAL), subnormal, normal)
  nan = u.op("or", u.shr(mantissa, 29), _F32_QUIET_NAN)
  magnitude = e.select(_is_nan(u, exponent, mantissa), nan, small)
  return e.bitcast(u.convert(u.op("or", magnitude, sign), U32), F32)


def float64_bits_of_float32(e: Emitter, value: Value, dtype: DType) -> Value:
  """The `dtype` (u64/s64) bits of the f32 `value` widened exactly to float64."""
  u = _Lanes(e, value.shape)
  x = u.convert(e.bitcast(value, U32), U64)
  exponent = u.op("and", u.shr(x, 23), 0xFF)
  mantissa = u.op("and", x, 0x7FFFFF)
  # An f32 subnormal m·2**-149 is normalised by converting m exactly to f32: its bits give the
  # exponent (biased as f32's, 747 below f64's bias after the 2**-149) and the mantissa.
  subnormal = e.binary("and", u.cmp("EQ", exponent, 0), u.cmp("NE", mantissa, 0))
  m_bits = u.convert(e.bitcast(u.convert(u.convert(mantissa, U32), F32), U32), U64)
  exponent = e.select(subnormal, u.op("add", u.op("and", u.shr(m_bits, 23), 0xFF), 747),
                      e.select(u.cmp("EQ", exponent, 0), exponent,
                               e.select(u.cmp("EQ", exponent, 0xFF), u.k(0x7FF),
                                        u.op("add", exponent, 1023 - 127))))
  mantissa = u.shl(e.select(subnormal, u.op("and", m_bits, 0x7FFFFF), mantissa), 29)
  mantissa = e.select(_is_nan(u, exponent, mantissa), u.op("or", mantissa, _F64_QUIET_BIT),
                      mantissa)
  bits = u.op("or", u.op("or", u.shl(u.shr(x, 31), 63), u.shl(exponent, 52)), mantissa)
  return bits if dtype == U64 else e.bitcast(bits, dtype)
