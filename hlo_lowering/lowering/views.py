"""Native lowerings that move no data: broadcast_in_dim and reshape give their result a view
of the operand's memory (a stride-0 broadcast, a re-shaped alias). Consumers read the view
directly (elementwise tiles load a broadcast with a stride-0 DMA); `ctx.dense_place` copies it
once, with one DMA, only where a consumer needs dense memory."""

from __future__ import annotations

from hlo_lowering.ir import Op
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.places import Place
from hlo_lowering.lowering.registry import register_lowering


@register_lowering("stablehlo.broadcast_in_dim", kind="native")
def lower_broadcast_in_dim(ctx: LoweringContext, op: Op) -> None:
  operand = op.operands[0]
  ctx.set_place(op.result, ctx.place(operand).broadcast(op.result.shape,
                                                          op.attrs["broadcast_dimensions"]))
  if ctx.splat(operand) is not None:
    ctx.set_splat(op.result, ctx.splat(operand))


@register_lowering("stablehlo.reshape", kind="native")
def lower_reshape(ctx: LoweringContext, op: Op) -> None:
  operand = op.operands[0]
  place = ctx.place(operand)
  if ctx.splat(operand) is not None:
    # Every element is the same: any shape is a stride-0 view of the first one.
    ctx.set_splat(op.result, ctx.splat(operand))
    ctx.set_place(op.result, Place(place.tensor, place.offset, op.result.shape,
                                   (0,) * op.result.type.rank, place.dtype))
    return
  if not place.is_dense:
    place = ctx.dense_place(operand)
  ctx.set_place(op.result, place.reshaped(op.result.shape))
