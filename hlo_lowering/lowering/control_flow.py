"""Control flow known only at run time: stablehlo.while, stablehlo.case and stablehlo.if become
program blocks whose exits (SP's jump / branch / switch, docs/program-format.md "Blocks and
control flow") pick the next block from a predicate or an index in HBM.

Regions are lowered by the same rules as top-level code (`ctx.lower_ops`), into their own
blocks. Values cross block boundaries only through HBM tensors:

- while: the loop-carried values live in one dense tensor each (the while's results). The
  current block copies the operands in and jumps to the condition block; the condition block
  ends in `branch(pred, body, after)`; the body block copies its results back (through staging
  tensors when a result reads another carried tensor, e.g. a swap) and jumps to the condition.
- case / if: the current block ends in `switch(index)` / `branch(pred)`; each branch block
  copies what its region returns into the results and jumps to the join block. A switch index
  outside [0, n) runs the last branch (XLA's semantics, implemented by the switch itself). An
  index or predicate known at compile time lowers only the branch it selects, with no blocks.

The block barrier makes every write of one block visible to the next, so the waits inside a
block never refer to another block. A place a region gives an outer value (a dense copy made by
`ctx.dense_place`) is forgotten when the region ends: the region's block may not have run.
"""

from __future__ import annotations

from hlo_lowering.ir import Op
from hlo_lowering.lowering.places import Place
from hlo_lowering.lowering.registry import register_lowering


def _copy(ctx, dst: Place, src: Place) -> None:
  if dst.size == 0 or src == dst:
    return
  ctx.dma(dst.collapsed_ap(), src.ap())


def _lower_region(ctx, block, args_places) -> list[Place]:
  """Lowers a region's ops into the current program block with its arguments at
  `args_places`; returns the places of what its terminator returns. Places the region gave to
  values defined outside it are dropped afterwards."""
  op, debug_id = ctx.op, ctx.debug_id
  saved = ctx.save_places()
  for arg, place in zip(block.args, args_places):
    ctx.set_place(arg, place)
  ctx.lower_ops(block.ops[:-1])
  returned = [ctx.place(v) for v in block.terminator.operands]
  ctx.restore_places(saved)
  ctx.op, ctx.debug_id = op, debug_id
  return returned


@register_lowering("stablehlo.while", describe="always: blocks with a branch at run time")
def lower_while(ctx, op: Op) -> None:
  builder, debug = ctx.builder, ctx.debug_id
  cond, body = op.regions[0].block, op.regions[1].block
  carried = [ctx.new_result(r) for r in op.results]
  for dst, value in zip(carried, op.operands):
    _copy(ctx, dst, ctx.place(value))
  cond_block, body_block, after = builder.new_block(), builder.new_block(), builder.new_block()
  builder.jump(cond_block, debug=debug)

  builder.set_block(cond_block)
  (predicate,) = _lower_region(ctx, cond, carried)
  builder.branch(predicate.ap(), body_block, after, debug=debug)

  builder.set_block(body_block)
  results = _lower_region(ctx, body, carried)
  # A result that reads a carried tensor (not as itself) is staged first, so no carried value
  # is overwritten before every result that reads it has been taken.
  carried_tensors = {p.tensor for p in carried}
  final = []
  for dst, src, value in zip(carried, results, op.results):
    if src != dst and src.tensor in carried_tensors and dst.size:
      staged = ctx.new_temporary(value)
      _copy(ctx, staged, src)
      src = staged
    final.append((dst, src))
  for dst, src in final:
    _copy(ctx, dst, src)
  builder.jump(cond_block, debug=debug)
  builder.set_block(after)


def _lower_branches(ctx, op: Op, select) -> None:
  """`select(branch_blocks)` ends the current block in a branch or switch over them."""
  builder, debug = ctx.builder, ctx.debug_id
  results = [ctx.new_result(r) for r in op.results]
  blocks = [builder.new_block() for _ in op.regions]
  join = builder.new_block()
  select(blocks)
  for region, block in zip(op.regions, blocks):
    builder.set_block(block)
    for dst, src in zip(results, _lower_region(ctx, region.block, [])):
      _copy(ctx, dst, src)
    builder.jump(join, debug=debug)
  builder.set_block(join)


def _lower_known_branch(ctx, op: Op, index: int) -> None:
  """The selector is a compile-time constant: only that branch's ops, in the current block."""
  region = op.regions[index].block
  current_op, debug_id = ctx.op, ctx.debug_id
  ctx.lower_ops(region.ops[:-1])
  ctx.op, ctx.debug_id = current_op, debug_id
  for result, value in zip(op.results, region.terminator.operands):
    ctx.set_place(result, ctx.place(value))


@register_lowering("stablehlo.case", describe="always: a switch at run time (constant index: "
                   "the selected branch inline)")
def lower_case(ctx, op: Op) -> None:
  n = len(op.regions)
  known = ctx.splat(op.operands[0])
  if known is not None:
    index = int(known)
    return _lower_known_branch(ctx, op, index if 0 <= index < n else n - 1)
  index = ctx.place(op.operands[0]).ap()
  _lower_branches(ctx, op, lambda blocks: ctx.builder.switch(index, blocks, debug=ctx.debug_id))


@register_lowering("stablehlo.if", describe="always: a branch at run time (constant predicate: "
                   "the selected branch inline)")
def lower_if(ctx, op: Op) -> None:
  known = ctx.splat(op.operands[0])
  if known is not None:
    return _lower_known_branch(ctx, op, 0 if bool(known) else 1)
  predicate = ctx.place(op.operands[0]).ap()
  _lower_branches(ctx, op, lambda blocks: ctx.builder.branch(predicate, blocks[0], blocks[1],
                                                             debug=ctx.debug_id))
