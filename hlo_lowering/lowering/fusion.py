"""trn.fusion (passes/fuse_elementwise.py): a cluster of elementwise ops lowered as one tiled loop.

The region's broadcast_in_dim and constant ops are lowered by their own rules first (views and
splats: no instruction), so a broadcast operand is read with a stride-0 access pattern and a
splat becomes an immediate. The compute ops then run through `elementwise.lower_ops`, the same
tiling as a single elementwise op: per tile, each operand is loaded once, every op runs on SBUF
tiles of its own result dtype (so rounding is exactly the unfused program's), and only the values
the region returns are stored. Each op's instructions carry a debug entry of their own (the op's
name, JAX name and source line), so profiles and errors point at the original ops.
"""

from __future__ import annotations

from hlo_lowering.ir import Op
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.elementwise import lower_ops
from hlo_lowering.lowering.registry import find_rule, register_lowering

VIEW_OPS = frozenset({"stablehlo.broadcast_in_dim", "stablehlo.constant"})


@register_lowering("trn.fusion", kind="native")
def lower_fusion(ctx: LoweringContext, op: Op) -> None:
  block = op.regions[0].block
  for arg, value in zip(block.args, op.operands):
    ctx.set_place(arg, ctx.place(value))
    if ctx.splat(value) is not None:
      ctx.set_splat(arg, ctx.splat(value))
  compute = []
  for inner in block.ops[:-1]:
    if inner.name in VIEW_OPS:
      find_rule(inner, ctx).fn(ctx, inner)
    else:
      compute.append(inner)
  # Lowered natively inside the fusion, by the fusion's rule: "fused" in the debug table.
  rule = ctx.builder.debug_entries[ctx.debug_id].rule
  debug_ids = {inner: ctx.builder.debug(op=inner.name, name=inner.loc.name,
                                        location=inner.loc.position, lowering="fused", rule=rule)
               for inner in compute}
  lower_ops(ctx, compute, dict(zip(block.terminator.operands, op.results)), debug_ids)
