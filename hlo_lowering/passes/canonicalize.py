"""canonicalize: normalise forms the lowerings match on, fold small constants, drop dead ops.

Requires: calls inlined (inline-calls).
Ensures: every single-operand stablehlo.reduce / reduce_window whose body is one binary op of its
two arguments carries `attrs["reducer"]` (add, max, min, mul, and, or, xor), as does one whose
body on two pred scalars computes and, or or xor (torch_xla's any/all; the body may use constants
of the enclosing block); integer/boolean and shape ops of
at most folding.MAX_FOLDED_ELEMENTS elements whose operands are constants are constants; ops
whose results are unused are removed.
Runs after: unroll-static-loops (so unrolled loop counters fold away).
"""

from __future__ import annotations

import numpy as np

from hlo_lowering import folding
from hlo_lowering.ir import Block, Module, Op, Value, control_flow_blocks, use_counts
from hlo_lowering.program import DType

_REDUCER_BODIES = {
    "stablehlo.add": "add", "stablehlo.maximum": "max", "stablehlo.minimum": "min",
    "stablehlo.multiply": "mul", "stablehlo.and": "and", "stablehlo.or": "or",
    "stablehlo.xor": "xor",
}
_SIDE_EFFECTS = frozenset({"stablehlo.custom_call", "stablehlo.outfeed", "stablehlo.send",
                           "stablehlo.recv", "stablehlo.infeed", "func.return",
                           "stablehlo.return"})


# A body of two pred arguments, by its results for (x, y) = (0, 0), (0, 1), (1, 0), (1, 1).
_PRED_TRUTH_TABLES = {(False, True, True, True): "or", (False, False, False, True): "and",
                      (False, True, True, False): "xor"}


def reducer_of(op: Op, constants: dict[Value, np.ndarray] | None = None) -> str | None:
  """The reducer name of a reduce-like op whose body is `return binop(arg0, arg1)`, or whose
  body on two pred scalars computes or, and or xor (torch_xla's any/all body is
  `select(or(x != false, y != false), true, false)`; `constants` are the values of constants
  defined outside that the body may use)."""
  if len(op.regions) != 1:
    return None
  block = op.regions[0].block
  if len(block.args) != 2:
    return None
  if all(a.dtype == DType.PRED and a.type.rank == 0 for a in block.args):
    return _PRED_TRUTH_TABLES.get(_truth_table(block, constants or {}))
  if len(block.ops) != 2:
    return None
  combine, ret = block.ops
  if len(combine.results) != 1 or ret.operands != combine.results:
    return None
  if len(combine.operands) != 2 or set(combine.operands) != set(block.args):
    return None
  return _REDUCER_BODIES.get(combine.name)


def _truth_table(block: Block, constants: dict[Value, np.ndarray]) -> tuple[bool, ...] | None:
  """The body's result for each pair of pred arguments, folded op by op; None unless every op
  folds (folding is exact for bool ops) and the body returns one value."""
  table = []
  for x, y in ((False, False), (False, True), (True, False), (True, True)):
    known = {**constants, block.args[0]: np.array(x), block.args[1]: np.array(y)}
    for op in block.ops[:-1]:
      if op.name == "stablehlo.constant":
        known[op.result] = op.attrs["value"]
        continue
      value = (folding.fold(op, [known[v] for v in op.operands])
               if all(v in known for v in op.operands) else None)
      if value is None:
        return None
      known[op.result] = value
    returned = block.terminator.operands
    if len(returned) != 1 or returned[0] not in known:
      return None
    table.append(bool(known[returned[0]]))
  return tuple(table)


def _fold_block(block: Block) -> None:
  known = {}
  new_ops = []
  for op in block.ops:
    if op.name == "stablehlo.constant":
      known[op.result] = op.attrs["value"]
    elif op.operands and all(v in known for v in op.operands):
      value = folding.fold(op, [known[v] for v in op.operands])
      if value is not None:
        op = folding.constant_op(value, op)
        known[op.result] = value
    if op.name in ("stablehlo.reduce", "stablehlo.reduce_window"):
      reducer = reducer_of(op, known)
      if reducer:
        op.attrs["reducer"] = reducer
    new_ops.append(op)
  block.ops = new_ops


def _remove_dead(block: Block) -> None:
  while True:
    counts = use_counts(block)
    kept = [op for op in block.ops
            if op.name in _SIDE_EFFECTS or any(counts.get(r, 0) for r in op.results)]
    if len(kept) == len(block.ops):
      return
    block.ops = kept


def run(module: Module) -> None:
  for function in module.functions.values():
    for block in control_flow_blocks(function.body):
      _fold_block(block)
    _remove_dead(function.body)
    for block in list(control_flow_blocks(function.body))[1:]:
      _remove_dead(block)
