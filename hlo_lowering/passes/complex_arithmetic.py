"""Complex64 arithmetic as float32 ops on (real, imaginary) pairs, for decompose-complex.

Each function takes pairs of f32 values of one shape and appends the f32 ops that compute the
complex result through a `PairMath` (the op being decomposed gives them its location). The
formulas are XLA's CPU backend's (xla/service/elemental_ir_emitter.cc), so that results agree
with the CPU backend to a few ulps, special values included where XLA handles them: multiply
(ac − bd, ad + bc) without FMA, divide by Smith's algorithm with XLA's zero/infinite fix-ups,
abs by max·sqrt(1 + (min/max)²), sqrt and rsqrt in polar form. docs/numerics.md states each one.
"""

from __future__ import annotations

import math

from hlo_lowering.ir import Value
from hlo_lowering.passes.expansion import Emitter
from hlo_lowering.program import DType

Pair = tuple[Value, Value]
F32 = DType.F32


class PairMath:
  """f32 elementwise ops (all operands of one shape) and the complex functions built on them."""

  def __init__(self, e: Emitter):
    self.e = e

  # --- f32 building blocks -------------------------------------------------------------------

  def op(self, name: str, *operands: Value, dtype: DType = F32, attrs=None) -> Value:
    return self.e.emit(f"stablehlo.{name}", list(operands), operands[0].shape, dtype, attrs)

  def const(self, value: float, like: Value) -> Value:
    return self.e.splat(value, F32, like.shape)

  def add(self, a, b): return self.op("add", a, b)
  def sub(self, a, b): return self.op("subtract", a, b)
  def mul(self, a, b): return self.op("multiply", a, b)
  def div(self, a, b): return self.op("divide", a, b)
  def neg(self, a): return self.op("negate", a)
  def abs(self, a): return self.op("abs", a)

  def compare(self, direction: str, a: Value, b: Value) -> Value:
    return self.e.compare(direction, a, b, "FLOAT")

  def is_nan(self, a: Value) -> Value:
    return self.compare("NE", a, a)

  def is_inf(self, a: Value) -> Value:
    return self.compare("EQ", self.abs(a), self.const(math.inf, a))

  def both(self, p: Value, q: Value) -> Value:
    return self.op("and", p, q, dtype=DType.PRED)

  def either(self, p: Value, q: Value) -> Value:
    return self.op("or", p, q, dtype=DType.PRED)

  def select(self, p: Value, a: Value, b: Value) -> Value:
    return self.e.select(p, a, b)

  def sign_bit(self, a: Value) -> Value:
    """Whether a's sign bit is set (-0.0 and negative NaNs included)."""
    bits = self.e.bitcast(a, DType.S32)
    return self.e.compare("LT", bits, self.e.splat(0, DType.S32, a.shape), "SIGNED")

  def copysign(self, magnitude: Value, sign: Value) -> Value:
    m = self.abs(magnitude)
    return self.select(self.sign_bit(sign), self.neg(m), m)

  # --- complex functions ---------------------------------------------------------------------

  def multiply(self, x: Pair, y: Pair) -> Pair:
    (a, b), (c, d) = x, y
    return (self.sub(self.mul(a, c), self.mul(b, d)), self.add(self.mul(a, d), self.mul(b, c)))

  def divide(self, x: Pair, y: Pair) -> Pair:
    """Smith's algorithm; where it gives (NaN, NaN), XLA's results for a zero denominator, an
    infinite numerator over a finite denominator and a finite one over an infinite one."""
    (a, b), (c, d) = x, y
    c_over_d = self.div(c, d)
    denom_d = self.add(d, self.mul(c_over_d, c))
    d_over_c = self.div(d, c)
    denom_c = self.add(c, self.mul(d_over_c, d))
    abs_c, abs_d = self.abs(c), self.abs(d)
    use_d = self.compare("LT", abs_c, abs_d)
    re = self.select(use_d, self.div(self.add(self.mul(c_over_d, a), b), denom_d),
                     self.div(self.add(self.mul(d_over_c, b), a), denom_c))
    im = self.select(use_d, self.div(self.sub(self.mul(c_over_d, b), a), denom_d),
                     self.div(self.sub(b, self.mul(d_over_c, a)), denom_c))
    zero, one, inf = self.const(0.0, a), self.const(1.0, a), self.const(math.inf, a)
    # Zero denominator (and a numerator that is not all NaN): ±inf · numerator.
    zero_denominator = self.both(
        self.both(self.compare("EQ", abs_c, zero), self.compare("EQ", abs_d, zero)),
        self.either(self.compare("EQ", a, a), self.compare("EQ", b, b)))
    inf_c = self.copysign(inf, c)
    zero_denominator_result = (self.mul(inf_c, a), self.mul(inf_c, b))
    # Infinite numerator, finite denominator.
    finite_c, finite_d = self.compare("NE", abs_c, inf), self.compare("NE", abs_d, inf)
    inf_a, inf_b = self.is_inf(a), self.is_inf(b)
    a_unit = self.copysign(self.select(inf_a, one, zero), a)
    b_unit = self.copysign(self.select(inf_b, one, zero), b)
    inf_numerator = self.both(self.either(inf_a, inf_b), self.both(finite_c, finite_d))
    inf_numerator_result = (self.mul(inf, self.add(self.mul(a_unit, c), self.mul(b_unit, d))),
                            self.mul(inf, self.sub(self.mul(b_unit, c), self.mul(a_unit, d))))
    # Finite numerator, infinite denominator.
    inf_c_flag, inf_d_flag = self.is_inf(c), self.is_inf(d)
    c_unit = self.copysign(self.select(inf_c_flag, one, zero), c)
    d_unit = self.copysign(self.select(inf_d_flag, one, zero), d)
    finite_a, finite_b = self.compare("NE", self.abs(a), inf), self.compare("NE", self.abs(b), inf)
    inf_denominator = self.both(self.either(inf_c_flag, inf_d_flag), self.both(finite_a, finite_b))
    inf_denominator_result = (self.mul(zero, self.add(self.mul(a, c_unit), self.mul(b, d_unit))),
                              self.mul(zero, self.sub(self.mul(b, c_unit), self.mul(a, d_unit))))
    both_nan = self.both(self.is_nan(re), self.is_nan(im))
    parts = []
    for k, part in enumerate((re, im)):
      fixed = self.select(inf_denominator, inf_denominator_result[k], part)
      fixed = self.select(inf_numerator, inf_numerator_result[k], fixed)
      fixed = self.select(zero_denominator, zero_denominator_result[k], fixed)
      parts.append(self.select(both_nan, fixed, part))
    return parts[0], parts[1]

  def _min_max_ratio(self, x: Pair) -> tuple[Value, Value, Value]:
    """(min, max, 1 + (min/max)²) of |re| and |im|: |x| = max·sqrt(1 + (min/max)²)."""
    abs_a, abs_b = self.abs(x[0]), self.abs(x[1])
    lo, hi = self.op("minimum", abs_a, abs_b), self.op("maximum", abs_a, abs_b)
    ratio = self.div(lo, hi)
    return lo, hi, self.add(self.const(1.0, lo), self.mul(ratio, ratio))

  def _or_min(self, result: Value, lo: Value) -> Value:
    # (0, 0), (inf, inf) and NaN make result NaN: XLA then returns the min (0, inf, NaN).
    return self.select(self.is_nan(result), lo, result)

  def abs_(self, x: Pair) -> Value:
    lo, hi, one_plus = self._min_max_ratio(x)
    return self._or_min(self.mul(hi, self.op("sqrt", one_plus)), lo)

  def sign(self, x: Pair) -> Pair:
    r = self.abs_(x)
    zero = self.const(0.0, r)
    is_zero = self.compare("EQ", r, zero)
    return (self.select(is_zero, zero, self.div(x[0], r)),
            self.select(is_zero, zero, self.div(x[1], r)))

  def sqrt(self, x: Pair) -> Pair:
    """sqrt|x| · (cos(t/2), sin(t/2)), t = atan2(im, re); sqrt|x| = sqrt(max)·(1 + (min/max)²)^¼."""
    a, b = x
    lo, hi, one_plus = self._min_max_ratio(x)
    r = self._or_min(self.mul(self.op("sqrt", hi),
                              self.op("power", one_plus, self.const(0.25, hi))), lo)
    half = self.mul(self.op("atan2", b, a), self.const(0.5, a))
    cos, sin = self.op("cosine", half), self.op("sine", half)
    zero, inf = self.const(0.0, a), self.const(math.inf, a)
    abs_b_inf = self.compare("EQ", self.abs(b), inf)
    a_neg_inf = self.compare("EQ", a, self.const(-math.inf, a))
    re = self.select(self.either(abs_b_inf, self.compare("EQ", a, inf)), inf,
                     self.select(self.both(a_neg_inf, self.compare("NE", self.abs(b), inf)),
                                 zero, self.mul(r, cos)))
    im = self.select(self.either(abs_b_inf, a_neg_inf), self.copysign(inf, b),
                     self.select(self.is_nan(r), r,
                                 self.select(self.compare("EQ", sin, zero), sin,
                                             self.mul(r, sin))))
    r_zero = self.compare("EQ", r, zero)
    return self.select(r_zero, zero, re), self.select(r_zero, zero, im)

  def rsqrt(self, x: Pair) -> Pair:
    """rsqrt|x| · (cos(−t/2), sin(−t/2)); 0 gives (inf, NaN), an infinite part a signed zero."""
    a, b = x
    lo, hi, one_plus = self._min_max_ratio(x)
    r = self.mul(self.op("rsqrt", hi), self.op("rsqrt", self.op("sqrt", one_plus)))
    r = self.select(self.is_nan(r), self.op("rsqrt", lo), r)
    half = self.mul(self.op("atan2", b, a), self.const(-0.5, a))
    re, im = self.mul(r, self.op("cosine", half)), self.mul(r, self.op("sine", half))
    zero, inf = self.const(0.0, a), self.const(math.inf, a)
    is_zero = self.both(self.compare("EQ", a, zero), self.compare("EQ", b, zero))
    infinite = self.either(self.both(self.is_inf(b), self.is_nan(a)), self.is_inf(a))
    re = self.select(is_zero, inf, self.select(infinite, self.copysign(zero, a), re))
    im = self.select(is_zero, self.const(math.nan, a),
                     self.select(infinite, self.neg(self.copysign(zero, b)), im))
    return re, im

  def exp(self, x: Pair) -> Pair:
    a, b = x
    exp_a = self.op("exponential", a)
    return self.mul(exp_a, self.op("cosine", b)), self.mul(exp_a, self.op("sine", b))

  def expm1(self, x: Pair) -> Pair:
    """(expm1(a)·cos b + cosm1(b), e^a·sin b), cosm1(b) = −2 sin²(b/2): no cancellation near 0;
    the imaginary part is 0 for b = 0 (also when e^a overflows)."""
    a, b = x
    sin_half = self.op("sine", self.mul(b, self.const(0.5, b)))
    cosm1 = self.mul(self.const(-2.0, b), self.mul(sin_half, sin_half))
    expm1_a = self.op("exponential_minus_one", a)
    cos_b = self.add(cosm1, self.const(1.0, b))
    re = self.add(self.mul(expm1_a, cos_b), cosm1)
    im = self.mul(self.add(expm1_a, self.const(1.0, a)), self.op("sine", b))
    zero = self.const(0.0, b)
    return re, self.select(self.compare("EQ", b, zero), zero, im)

  def sin_cos(self, x: Pair, cosine: bool) -> Pair:
    """sin z = (sin a·cosh b, cos a·sinh b), cos z = (cos a·cosh b, −sin a·sinh b), with
    cosh and sinh from ½e^b and ½/e^b."""
    a, b = x
    exp_b = self.op("exponential", b)
    half_exp, half_exp_neg = self.mul(self.const(0.5, b), exp_b), self.div(self.const(0.5, b), exp_b)
    sinh, cosh = self.sub(half_exp, half_exp_neg), self.add(half_exp, half_exp_neg)
    sin_a, cos_a = self.op("sine", a), self.op("cosine", a)
    if cosine:
      return self.mul(cos_a, cosh), self.neg(self.mul(sin_a, sinh))
    return self.mul(sin_a, cosh), self.mul(cos_a, sinh)

  def sin(self, x: Pair) -> Pair:
    return self.sin_cos(x, cosine=False)

  def cos(self, x: Pair) -> Pair:
    return self.sin_cos(x, cosine=True)

  def tanh(self, x: Pair) -> Pair:
    """(e^2a − e^−2a, 4 cos b sin b) / (e^2a + e^−2a + 4cos²b − 2), with expm1 for the
    exponentials; (±1, ±0) once e^2a + e^−2a overflows; XLA's NaN and zero cases."""
    a, b = x
    two_a = self.add(a, a)
    e_plus, e_minus = (self.op("exponential_minus_one", v) for v in (two_a, self.neg(two_a)))
    cos_b, sin_b = self.op("cosine", b), self.op("sine", b)
    four = self.const(4.0, a)
    imag_numerator = self.mul(four, self.mul(cos_b, sin_b))
    exp_sum = self.add(e_plus, e_minus)
    denominator = self.add(exp_sum, self.mul(four, self.mul(cos_b, cos_b)))
    overflow = self.compare("EQ", exp_sum, self.const(math.inf, a))
    re = self.select(overflow, self.copysign(self.const(1.0, a), a),
                     self.div(self.sub(e_plus, e_minus), denominator))
    im = self.div(imag_numerator, denominator)
    a_inf, a_not_inf = self.is_inf(a), self.compare("NE", self.abs(a), self.const(math.inf, a))
    sin_nan = self.is_nan(imag_numerator)
    nan, zero = self.const(math.nan, a), self.const(0.0, a)
    re = self.select(self.both(sin_nan, a_not_inf), nan, re)
    im = self.select(self.either(self.compare("EQ", b, zero), self.both(a_inf, sin_nan)), zero, im)
    return re, im

  def tan(self, x: Pair) -> Pair:
    """tan z = −i·tanh(i·z): tanh of (−b, a), then (im, −re)."""
    re, im = self.tanh((self.neg(x[1]), x[0]))
    return im, self.neg(re)

  def log(self, x: Pair) -> Pair:
    return self.op("log", self.abs_(x)), self.op("atan2", x[1], x[0])

  def log1p(self, x: Pair) -> Pair:
    """(log|1 + z| as log1p(max − 1) + ½·log1p((min/max)²) of |1 + a| and |b| — with a itself
    for max − 1 when 1 + a > |b| —, NaN → the min; atan2(b, 1 + a))."""
    a, b = x
    one = self.const(1.0, a)
    a1 = self.add(a, one)
    abs_a1, abs_b = self.abs(a1), self.abs(b)
    lo, hi = self.op("minimum", abs_a1, abs_b), self.op("maximum", abs_a1, abs_b)
    hi_minus_one = self.select(self.compare("GT", a1, abs_b), a, self.sub(hi, one))
    ratio = self.div(lo, hi)
    re = self.add(self.mul(self.const(0.5, a), self.op("log_plus_one", self.mul(ratio, ratio))),
                  self.op("log_plus_one", hi_minus_one))
    return self.select(self.is_nan(re), lo, re), self.op("atan2", b, a1)

  def power(self, x: Pair, y: Pair) -> Pair:
    """|x|^c · e^(−d·arg x) · (cos q, sin q), q = c·arg x + d·log|x|, with XLA's cases for
    0^y, x^0, 1^y and inf^c."""
    (a, b), (c, d) = x, y
    r = self.abs_(x)
    arg = self.op("atan2", b, a)
    coeff = self.mul(self.op("power", r, c), self.op("exponential", self.neg(self.mul(d, arg))))
    q = self.add(self.mul(c, arg), self.mul(d, self.op("log", r)))
    re, im = self.mul(coeff, self.op("cosine", q)), self.mul(coeff, self.op("sine", q))
    zero, one, inf = self.const(0.0, a), self.const(1.0, a), self.const(math.inf, a)
    eq = lambda u, v: self.compare("EQ", u, v)  # noqa: E731
    d_zero = eq(d, zero)
    zero_base = self.both(self.both(eq(r, zero), d_zero), self.compare("LE", zero, c))
    re = self.select(zero_base, self.select(eq(c, zero), one, zero), re)
    im = self.select(zero_base, zero, im)
    zero_power = self.both(eq(c, zero), d_zero)
    unit_base = self.both(eq(a, one), eq(b, zero))
    re = self.select(self.either(zero_power, unit_base), one, re)
    im = self.select(self.either(zero_power, unit_base), zero, im)
    inf_base = self.both(self.both(eq(a, inf), eq(b, zero)), d_zero)
    for direction, value in (("GT", inf), ("LT", zero)):
      case = self.both(inf_base, self.compare(direction, c, zero))
      re, im = self.select(case, value, re), self.select(case, zero, im)
    return re, im
