"""canonicalize-scatter: scatter update computations that gp_scatter does not combine with are
rewritten into ones it does, exactly.

`x.at[i].subtract(v)` / lax.scatter_sub (body `return arg0 - arg1`) becomes a scatter-add of
`-v`: x − v and x + (−v) are the same IEEE operation (negation is exact, the sum rounds once) and
the same wrapping integer sum, and duplicate indices still combine one update after another in
the same order. A body `return arg1 - arg0` (v − x) has no such form and is left to the scatter
rule's error.

Requires: calls inlined (inline-calls).
Ensures: no single-operand stablehlo.scatter has a body `return subtract(arg0, arg1)`; the
negate keeps the scatter's location.
Runs after: decompose-batch-norm, before canonicalize (which the scatter rule's body matching
does not need).
"""

from __future__ import annotations

from hlo_lowering.ir import Block, Module, Op, Region, Value
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


def _expand(op: Op, e: Emitter) -> list[Value] | None:
  if op.name != "stablehlo.scatter" or not _is_subtract_body(op):
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
