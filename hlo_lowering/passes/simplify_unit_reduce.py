"""simplify-unit-reduce: a reduce over dims of size one becomes a reshape of its operand, which
moves no data and fuses with its neighbours.

JAX emits these for reductions over a batch dim of size one (a transformer's gradient sums over
batch 1). Reduced as a reduction, every kept element is its own row: a [1, 16, 512, 512] sum was
~98 k instructions of one-element tiles. The rewrite is XLA's algebraic simplifier's: the init
value is taken to be the reducer's identity and the body is never applied, so the result equals
the CPU backend's bit for bit (-0.0 stays -0.0; a non-identity init is not added, there either).

Requires: canonicalize (the reduce carries `attrs["reducer"]`).
Ensures: no single-operand reduce whose reduced dims all have size one is left (also inside
while/case/if regions); each new reshape keeps the reduce's location.
Runs after: canonicalize and normalize-dot-general, before fuse-elementwise.
"""

from __future__ import annotations

import math

from hlo_lowering.ir import Module, Op, control_flow_blocks, replace_uses

# Reducers whose body is one op of its two arguments (canonicalize's names).
_REDUCERS = frozenset({"add", "max", "min", "mul", "and", "or", "xor"})


def is_unit_reduce(op: Op) -> bool:
  if op.name != "stablehlo.reduce" or len(op.operands) != 2:
    return False
  if op.attrs.get("reducer") not in _REDUCERS:
    return False
  shape = op.operands[0].shape
  return math.prod(shape[d] for d in op.attrs["dimensions"]) == 1


def run(module: Module) -> None:
  for function in module.functions.values():
    for block in control_flow_blocks(function.body):
      replaced, ops = {}, []
      for op in block.ops:
        if is_unit_reduce(op):
          reshape = Op("stablehlo.reshape", [op.operands[0]], [op.result.type], loc=op.loc)
          ops.append(reshape)
          replaced[op.result] = reshape.result
        else:
          ops.append(op)
      if replaced:
        block.ops = ops
        replace_uses(block, replaced)
