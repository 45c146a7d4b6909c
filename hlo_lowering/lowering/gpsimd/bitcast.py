"""stablehlo.bitcast_convert as gp_bitcast: a raw byte copy between two whole tensors."""

from __future__ import annotations

from hlo_lowering.ir import Op
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.places import Place
from hlo_lowering.lowering.registry import register_lowering


def _whole_tensor(ctx: LoweringContext, place: Place) -> bool:
  tensor = ctx.builder.tensors[place.tensor]
  return place.is_dense and place.offset == 0 and tuple(tensor.shape) == place.shape


@register_lowering("stablehlo.bitcast_convert", kind="gpsimd")
def lower_bitcast_convert(ctx: LoweringContext, op: Op) -> None:
  operand = op.operands[0]
  out = ctx.new_result(op.result)
  if not out.size:
    return
  source = ctx.place(operand)
  if not _whole_tensor(ctx, source):
    # gp_bitcast copies whole tensors: give the operand a tensor of its own first.
    whole = Place.dense(ctx.builder.tensor("temporary", operand.dtype, operand.shape,
                                           name=f"t{len(ctx.builder.tensors)}"),
                        operand.shape, operand.dtype)
    ctx.builder.gp_copy(whole.ap(), source.ap(), debug=ctx.debug_id)
    source = whole
  ctx.builder.gp_bitcast(out.tensor, source.tensor, debug=ctx.debug_id)
