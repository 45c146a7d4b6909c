"""stablehlo.constant: data in the program's tensor table, no instruction.

A splat (every element equal, what JAX emits for `x + 1.0` and for zeros/ones) is stored as one
element viewed with stride 0, and recorded as a compile-time scalar so elementwise consumers use
it as an immediate operand.
"""

from __future__ import annotations

import numpy as np

from hlo_lowering.ir import Op
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.places import Place
from hlo_lowering.lowering.registry import register_lowering


def splat_value(array: np.ndarray):
  """The numpy scalar all elements of `array` equal, or None (also None when empty)."""
  if array.size == 0:
    return None
  first = array.reshape(-1)[0] if array.ndim else array[()]
  if array.ndim and not all(s == 0 for s in array.strides):
    as_bytes = np.ascontiguousarray(array).view(np.uint8).reshape(array.size, -1)
    if not (as_bytes == as_bytes[0]).all():
      return None
  return first


@register_lowering("stablehlo.constant", kind="native")
def lower_constant(ctx: LoweringContext, op: Op) -> None:
  array = np.asarray(op.attrs["value"], dtype=op.result.dtype.numpy)
  name = op.loc.name or "constant"
  scalar = splat_value(array)
  if scalar is None:
    tensor = ctx.constant_tensor(array, name)
    ctx.set_place(op.result, Place.dense(tensor, op.result.shape, op.result.dtype))
    return
  tensor = ctx.constant_tensor(np.array([scalar], dtype=array.dtype), name)
  ctx.set_place(op.result, Place(tensor, 0, op.result.shape, (0,) * op.result.type.rank,
                                 op.result.dtype))
  ctx.set_splat(op.result, scalar)
