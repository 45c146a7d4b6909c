"""stablehlo.reduce with one operand and a recognised reducer, as one gp_reduce; and the
two-operand (values, indices) reduce of argmax/argmin (JAX's or torch_xla's body) as one
gp_arg_reduce.

The canonicalize pass names the reducer (`attrs["reducer"]`: add, max, min, mul, and, or, xor).
The operand is viewed with its reduced dims moved last, as gp_reduce wants. A compile-time init
value becomes the instruction's immediate; a runtime one is combined afterwards.
"""

from __future__ import annotations

import numpy as np

from hlo_lowering.ir import Op
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.gpsimd.comparators import (arg_reduce_kind, select_arg_reduce_kind,
                                                      unrecognised_region)
from hlo_lowering.lowering.registry import register_lowering
from hlo_lowering.program import Alu, DType, Scalar
from hlo_lowering.program.enums import ARG_REDUCE_SELECT

REDUCERS = {"add": Alu.ADD, "max": Alu.MAX, "min": Alu.MIN, "mul": Alu.MUL, "and": Alu.AND,
            "or": Alu.OR, "xor": Alu.XOR}


def identity(reducer: str, dtype: DType):
  """The value x with reducer(x, y) == y for every y of `dtype`."""
  if reducer in ("add", "or", "xor"):
    return 0
  if reducer == "mul":
    return 1
  if reducer == "and":
    return 1 if dtype == DType.PRED else (-1 if dtype.is_signed_int else
                                          int(np.iinfo(dtype.numpy).max))
  if dtype.is_float:
    return float("-inf") if reducer == "max" else float("inf")
  if dtype == DType.PRED:
    return 0 if reducer == "max" else 1
  info = np.iinfo(dtype.numpy)
  return int(info.min) if reducer == "max" else int(info.max)


def _accepts(op: Op) -> bool:
  return len(op.operands) == 2 and op.attrs.get("reducer") in REDUCERS


@register_lowering("stablehlo.reduce", kind="gpsimd", when=_accepts,
                   describe="one input, body add, max, min, mul, and, or or xor")
def lower_reduce(ctx: LoweringContext, op: Op) -> None:
  operand, init = op.operands
  reducer = op.attrs["reducer"]
  dims = list(op.attrs["dimensions"])
  out = ctx.new_result(op.result)
  if not out.size:
    return
  init_place = ctx.place(init).broadcast(op.result.shape, [])
  if not operand.type.size:
    ctx.builder.gp_copy(out.ap(), init_place.ap(), debug=ctx.debug_id)
    return
  kept = [d for d in range(operand.type.rank) if d not in dims]
  source = ctx.place(operand).permuted(kept + dims)
  init_scalar = ctx.splat_scalar(init)
  immediate = init_scalar or Scalar(operand.dtype, identity(reducer, operand.dtype))
  ctx.builder.gp_reduce(REDUCERS[reducer], out.ap(), source.ap(), len(dims), immediate,
                        debug=ctx.debug_id)
  if init_scalar is None:
    ctx.builder.gp_elementwise(REDUCERS[reducer], out.ap(), [out.ap(), init_place.ap()],
                               debug=ctx.debug_id)


@register_lowering("stablehlo.reduce", kind="gpsimd", when=lambda op: len(op.operands) > 2,
                   describe="values and indices with JAX's argmax/argmin body or torch_xla's "
                            "select body, constant inits")
def lower_variadic_reduce(ctx: LoweringContext, op: Op) -> None:
  """reduce((values, indices), (init_value, init_index)) with JAX's argmax/argmin body, or with
  XLA's select body that torch_xla emits (gp_arg_reduce's select form)."""
  kind, body = arg_reduce_kind(op), 0
  if kind is None:
    kind, body = select_arg_reduce_kind(op), ARG_REDUCE_SELECT
  if kind is None:
    raise unrecognised_region(op, f"a reduce of {len(op.operands) // 2} operands whose body is "
                                  "neither JAX's argmax/argmin comparator nor torch_xla's")
  values, indices, init_value, init_index = op.operands
  inits = ctx.splat_scalar(init_value), ctx.splat_scalar(init_index)
  if None in inits:
    raise unrecognised_region(op, "an argmax/argmin reduce whose initial values are not "
                                  "compile-time constants")
  dims = list(op.attrs["dimensions"])
  out_value, out_index = (ctx.new_result(result) for result in op.results)
  if not out_value.size:
    return
  if not values.type.size:
    for out, init in zip((out_value, out_index), (init_value, init_index)):
      ctx.builder.gp_copy(out.ap(), ctx.place(init).broadcast(out.shape, []).ap(),
                          debug=ctx.debug_id)
    return
  kept = [d for d in range(values.type.rank) if d not in dims]
  ctx.builder.gp_arg_reduce(Alu.MAX if kind == "max" else Alu.MIN, out_value.ap(),
                            out_index.ap(), ctx.place(values).permuted(kept + dims).ap(),
                            ctx.place(indices).permuted(kept + dims).ap(), len(dims), *inits,
                            body=body, debug=ctx.debug_id)
