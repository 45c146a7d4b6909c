"""stablehlo.sort with a comparator JAX emits (jnp.sort, jnp.argsort, lax.sort with num_keys) as
one gp_sort over views with the sort dimension last.

comparators.sort_order recognises the comparator: ascending or descending lexicographic over
the first keys, floats in JAX's canonical order (-0.0 == 0.0, NaNs last) or IEEE totalOrder.
gp_sort is always stable, which is also a valid result for is_stable = false.
"""

from __future__ import annotations

from hlo_lowering.ir import Op
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.gpsimd.comparators import sort_order, unrecognised_region
from hlo_lowering.lowering.registry import register_lowering
from hlo_lowering.program.enums import SORT_FLOAT_CANONICAL, SORT_FLOAT_TOTAL_ORDER


@register_lowering("stablehlo.sort", kind="gpsimd")
def lower_sort(ctx: LoweringContext, op: Op) -> None:
  order = sort_order(op, ctx.splat)
  if order is None:
    raise unrecognised_region(op, "the comparator is not one JAX emits for sort/argsort "
                                  "(lexicographic LT/GT over the first operands)")
  outs = [ctx.new_result(result) for result in op.results]
  if not outs[0].size:
    return
  rank = op.results[0].type.rank
  if rank == 0:
    for out, operand in zip(outs, op.operands):
      ctx.builder.gp_copy(out.ap(), ctx.place(operand).ap(), debug=ctx.debug_id)
    return
  dim = op.attrs["dimension"] % rank
  perm = [d for d in range(rank) if d != dim] + [dim]
  ctx.builder.gp_sort([out.permuted(perm).ap() for out in outs],
                      [ctx.place(v).permuted(perm).ap() for v in op.operands],
                      num_keys=order.num_keys, descending=order.descending,
                      float_order=(SORT_FLOAT_CANONICAL if order.canonical_floats
                                   else SORT_FLOAT_TOTAL_ORDER),
                      debug=ctx.debug_id)
