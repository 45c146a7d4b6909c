"""decompose-reduce-precision: `stablehlo.reduce_precision` (jax.lax.reduce_precision) becomes
integer bit operations on the float's bits, exactly as XLA's elemental IR emitter computes it
(EmitReducePrecisionIR, quiet_nans off), so results match XLA's CPU backend bit for bit.

On the bits x (same-width unsigned integer; m, e: the source's mantissa/exponent widths;
dm, de: the requested ones):
- dm < m: round to nearest even by adding ((1 << (m-dm-1)) - 1) plus the last kept mantissa bit,
  then clear the m-dm low bits (a carry into the exponent is the correct rounding up);
- de < e: an exponent field above bias + (2^(de-1) - 1) becomes ±Inf, one at or below
  bias − (2^(de-1) - 1) becomes ±0 (denormals of the reduced type flush to zero, as in XLA);
- NaN inputs (|x| above the exponent mask) are returned unchanged, payload and all (also for
  mantissa_bits = 0, as XLA CPU does today); bf16 NaNs become the quiet NaN of their sign, as
  XLA CPU gives them (it computes bf16 in f32 and converts back).
An op that keeps both widths is replaced by its operand.
f32, bf16 and f16 operands; fp8 ones (non-IEEE NaN/Inf encodings) are left to the no-rule error.

Requires: calls inlined (inline-calls).
Ensures: no reduce_precision of an f32/bf16/f16 operand is left (also inside while/case/if
regions); each new op keeps its location.
Runs after: decompose-batch-norm, before canonicalize and fuse-elementwise (the bit ops fuse).
"""

from __future__ import annotations

import ml_dtypes

from hlo_lowering.ir import Module, Op, Value
from hlo_lowering.passes.expansion import UNSIGNED_OF, Emitter, expand_ops
from hlo_lowering.program import DType

_SOURCES = (DType.F32, DType.BF16, DType.F16)


def _expand(op: Op, e: Emitter) -> list[Value] | None:
  if op.name != "stablehlo.reduce_precision" or op.operands[0].dtype not in _SOURCES:
    return None
  x = op.operands[0]
  info = ml_dtypes.finfo(x.dtype.numpy)
  m, ex = int(info.nmant), int(info.nexp)
  dm, de = int(op.attrs["mantissa_bits"]), int(op.attrs["exponent_bits"])
  if dm >= m and de >= ex:
    return [x]
  utype = UNSIGNED_OF[x.dtype]
  nbits = utype.itemsize * 8
  sign_mask = 1 << (nbits - 1)
  exp_mask = ((1 << ex) - 1) << m
  bits = x_bits = e.bitcast(x, utype)
  is_nan = e.compare("GT", e.binary_splat("and", bits, sign_mask - 1),
                     e.splat(exp_mask, utype, x.shape), "UNSIGNED")
  if dm < m:
    last_bit_mask = 1 << (m - dm)
    last_bit = e.binary_splat("shift_right_logical",
                              e.binary_splat("and", bits, last_bit_mask), m - dm)
    bias = e.binary_splat("add", last_bit, (last_bit_mask >> 1) - 1)
    truncation_mask = ~(last_bit_mask - 1) & ((1 << nbits) - 1)
    bits = e.binary_splat("and", e.binary("add", bits, bias), truncation_mask)
  if de < ex:
    exponent_bias = (1 << (ex - 1)) - 1
    reduced_bias = (1 << (de - 1)) - 1
    exponent = e.binary_splat("and", bits, exp_mask)
    overflows = e.compare("GT", exponent,
                          e.splat((exponent_bias + reduced_bias) << m, utype, x.shape),
                          "UNSIGNED")
    underflows = e.compare("LE", exponent,
                           e.splat((exponent_bias - reduced_bias) << m, utype, x.shape),
                           "UNSIGNED")
    signed_zero = e.binary_splat("and", bits, sign_mask)
    signed_inf = e.binary_splat("or", signed_zero, exp_mask)
    bits = e.select(overflows, signed_inf, bits)
    bits = e.select(underflows, signed_zero, bits)
  # NaNs are chosen on the bits, so payloads survive (an ALU select would quiet them).
  nan_bits = x_bits
  if x.dtype == DType.BF16:
    # XLA's CPU backend computes bf16 in f32 and its f32 -> bf16 convert gives the quiet NaN.
    nan_bits = e.binary_splat("or", e.binary_splat("and", x_bits, sign_mask), 0x7FC0)
  return [e.bitcast(e.select(is_nan, nan_bits, bits), x.dtype)]


def run(module: Module) -> None:
  expand_ops(module, _expand)
