"""stablehlo.custom_call @dce_sink: JAX's marker that a value counts as used
(`lax.dce_sink(x, prevent_mlir_dce=True)`), so that the computation of `x` is not removed. It has
no results and no effect on the device, so it lowers to no instruction; the values it reads stay
live (canonicalize keeps custom calls as side effects, so their producers run)."""

from __future__ import annotations

from hlo_lowering.ir import Op
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.registry import register_lowering

DCE_SINK_TARGET = "dce_sink"


def is_dce_sink(op: Op) -> bool:
  """call_target_name dce_sink: JAX's keep-alive marker, no instruction"""
  return (op.name == "stablehlo.custom_call" and not op.results
          and op.attrs.get("call_target_name") == DCE_SINK_TARGET)


@register_lowering("stablehlo.custom_call", when=is_dce_sink)
def lower_dce_sink(ctx: LoweringContext, op: Op) -> None:
  del ctx, op  # the operands are computed by their own ops; the marker itself does nothing
