"""stablehlo.iota as one gp_iota over the dense result."""

from __future__ import annotations

from hlo_lowering.ir import Op
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.registry import register_lowering


@register_lowering("stablehlo.iota", kind="gpsimd")
def lower_iota(ctx: LoweringContext, op: Op) -> None:
  out = ctx.new_result(op.result)
  if out.size:
    ctx.builder.gp_iota(out.ap(), op.attrs["iota_dimension"], debug=ctx.debug_id)
