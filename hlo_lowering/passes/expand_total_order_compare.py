"""expand-total-order-compare: a float `stablehlo.compare` with compare_type TOTALORDER becomes a
signed integer compare of total-order keys (jnp.searchsorted, digitize, histogram).

The key is XLA's (its elemental IR emitter): the float's bits as the same-width signed integer
x, with every bit but the sign flipped when x is negative, x ^ ((x >> (bits-1)) & INT_MAX)
(arithmetic shift). Positive floats keep their order; negative ones, whose magnitude grows with
their bits, are mirrored below zero, so -NaN < -Inf < … < -0 < +0 < … < +Inf < +NaN and NaNs
order by payload. An integer compare with TOTALORDER just becomes SIGNED/UNSIGNED.

Requires: calls inlined (inline-calls).
Ensures: no compare with compare_type TOTALORDER is left outside sort/reduce/select_and_scatter
bodies (whose comparators lowering matches as a whole); each new op keeps the compare's location.
Runs after: decompose-batch-norm, before canonicalize and fuse-elementwise (the key ops fuse).
"""

from __future__ import annotations

from hlo_lowering.ir import Module, Op, Value
from hlo_lowering.passes.expansion import SIGNED_OF, Emitter, expand_ops


def _key(e: Emitter, x: Value) -> Value:
  itype = SIGNED_OF[x.dtype]
  bits = itype.itemsize * 8
  x = e.bitcast(x, itype)
  mask = e.binary_splat("and", e.binary_splat("shift_right_arithmetic", x, bits - 1),
                        (1 << (bits - 1)) - 1)
  return e.binary("xor", x, mask)


def _expand(op: Op, e: Emitter) -> list[Value] | None:
  if op.name != "stablehlo.compare" or op.attrs.get("compare_type") != "TOTALORDER":
    return None
  a, b = op.operands
  direction = op.attrs["comparison_direction"]
  if not a.dtype.is_float:
    return [e.compare(direction, a, b, "SIGNED" if a.dtype.is_signed_int else "UNSIGNED")]
  return [e.compare(direction, _key(e, a), _key(e, b), "SIGNED")]


def run(module: Module) -> None:
  expand_ops(module, _expand)
