"""stablehlo.sort with a comparator JAX emits (jnp.sort, jnp.argsort, lax.sort with num_keys) as
one gp_sort over views with the sort dimension last.

comparators.sort_order recognises the comparator: ascending or descending lexicographic over
the first keys, floats in JAX's canonical order (-0.0 == 0.0, NaNs last) or IEEE totalOrder.
gp_sort is always stable, which is also a valid result for is_stable = false. Any other
comparator is one gp_region_sort: the same stable sort, each comparison the comparator compiled
to a region program (gpsimd/region_program.py).
"""

from __future__ import annotations

from hlo_lowering.ir import Op
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.gpsimd.comparators import sort_order
from hlo_lowering.lowering.gpsimd.region_program import compile_region
from hlo_lowering.lowering.registry import register_lowering
from hlo_lowering.program.enums import SORT_FLOAT_CANONICAL, SORT_FLOAT_TOTAL_ORDER


@register_lowering("stablehlo.sort", kind="gpsimd")
def lower_sort(ctx: LoweringContext, op: Op) -> None:
  order = sort_order(op, ctx.splat)
  n = len(op.operands)
  # The comparator's arguments pair each operand's lhs and rhs; the region takes every lhs, then
  # every rhs.
  region = None if order is not None else compile_region(
      op, arg_registers=[i // 2 + (i % 2) * n for i in range(2 * n)], outer_splat=ctx.splat)
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
  dsts = [out.permuted(perm).ap() for out in outs]
  srcs = [ctx.place(v).permuted(perm).ap() for v in op.operands]
  if region is not None:
    ctx.builder.gp_region_sort(dsts, srcs, region.words, debug=ctx.debug_id)
    return
  ctx.builder.gp_sort(dsts, srcs, num_keys=order.num_keys, descending=order.descending,
                      float_order=(SORT_FLOAT_CANONICAL if order.canonical_floats
                                   else SORT_FLOAT_TOTAL_ORDER),
                      debug=ctx.debug_id)
