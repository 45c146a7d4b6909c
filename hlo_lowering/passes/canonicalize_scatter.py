"""canonicalize-scatter: scatter update computations that gp_scatter does not combine with are
rewritten into ones it does, exactly.

`x.at[i].subtract(v)` / lax.scatter_sub (body `return arg0 - arg1`) becomes a scatter-add of
`-v`: x − v and x + (−v) are the same IEEE operation (negation is exact, the sum rounds once) and
the same wrapping integer sum, and duplicate indices still combine one update after another in
the same order. A body `return arg1 - arg0` (v − x) has no such form and is left to the scatter
rule's error.

A scatter into rank-0 operands with rank-0 updates (`x.at[...].set(v)` on a scalar, which Flax's
`Variable[...] = v` emits) applies its update computation exactly once, to the operands and the
updates: its body's ops replace it (the index window rules need rank >= 1).

Requires: calls inlined (inline-calls).
Ensures: no single-operand stablehlo.scatter has a body `return subtract(arg0, arg1)`; no
stablehlo.scatter has rank-0 operands and updates; the negate keeps the scatter's location, the
inlined body ops keep theirs.
Runs after: decompose-batch-norm, before canonicalize (which the scatter rule's body matching
does not need).
"""

from __future__ import annotations

from hlo_lowering.ir import Block, Module, Op, Region, Value, clone_op
from hlo_lowering.passes.expansion import Emitter, expand_ops


def _is_subtract_body(op: Op) -> bool:
  if len(op.operands) != 3 or len(op.regions) != 1:
    return False
  block = op.regions[0].block
  if len(block.args) != 2 or len(block.ops) != 2:
    return False
  combine, ret = block.ops
  return (combine.name == "stablehlo.subtract" and combine.operands == block.args
          and ret.operands == combine.results)


def _is_scalar_scatter(op: Op) -> bool:
  """Rank-0 operands and updates: one update, with no index to apply."""
  n = len(op.results)
  operands, updates = op.operands[:n], op.operands[n + 1:]
  return all(v.type.shape == () for v in operands + updates)


def _inline_body(op: Op, e: Emitter) -> list[Value]:
  n = len(op.results)
  block = op.regions[0].block
  mapping = dict(zip(block.args, op.operands[:n] + op.operands[n + 1:]))
  *body, ret = block.ops
  e.new_ops.extend(clone_op(body_op, mapping) for body_op in body)
  return [mapping.get(v, v) for v in ret.operands]


def _expand(op: Op, e: Emitter) -> list[Value] | None:
  if op.name != "stablehlo.scatter":
    return None
  if _is_scalar_scatter(op):
    return _inline_body(op, e)
  if not _is_subtract_body(op):
    return None
  operand, indices, updates = op.operands
  negated = e.emit("stablehlo.negate", [updates], updates.shape, updates.dtype)
  block = op.regions[0].block
  subtract, ret = block.ops
  add = Op("stablehlo.add", list(block.args), [subtract.result.type], loc=subtract.loc)
  body = Block(list(block.args), [add, Op("stablehlo.return", [add.result], [], loc=ret.loc)])
  scatter = Op(op.name, [operand, indices, negated], [r.type for r in op.results],
               dict(op.attrs), [Region(body)], op.loc)
  e.new_ops.append(scatter)
  return scatter.results


def run(module: Module) -> None:
  expand_ops(module, _expand)
