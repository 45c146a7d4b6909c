"""stablehlo.dot_general in batch-matmul form as one gp_batch_matmul.

normalize-dot-general rewrites every dot_general to lhs [B, M, K] x rhs [B, K, N] -> [B, M, N].
This rule takes any dtype (integer dots have no TensorE path; it computes in the lhs's domain, fp32
for floats); a native tiled rule registered for float dots takes precedence where it applies.
"""

from __future__ import annotations

from hlo_lowering.ir import Op
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.registry import register_lowering
from hlo_lowering.passes.normalize_dot_general import is_batch_matmul
from hlo_lowering.program import Scalar


@register_lowering("stablehlo.dot_general", kind="gpsimd", when=is_batch_matmul,
                   reads_views=True, describe="always (any dtype; normalize-dot-general makes "
                                              "every dot_general a batch matmul)")
def lower_dot_general(ctx: LoweringContext, op: Op) -> None:
  lhs, rhs = op.operands
  out = ctx.new_result(op.result)
  if not out.size:
    return
  if lhs.shape[2] == 0:
    ctx.builder.gp_fill(out.ap(), Scalar(out.dtype, 0), debug=ctx.debug_id)
    return
  ctx.builder.gp_batch_matmul(out.ap(), ctx.place(lhs).ap(), ctx.place(rhs).ap(),
                              debug=ctx.debug_id)
