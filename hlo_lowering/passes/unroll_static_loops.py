"""unroll-static-loops: replace a stablehlo.while whose trip count is known at compile time by
copies of its body (the program format has no control flow).

Requires: calls inlined (inline-calls), so loop bodies hold no func.call.
Ensures: every while whose condition folds to a constant on each iteration (a counter that starts
at a constant and steps by a constant, as in jax.random's threefry and fori_loop with static
bounds) is gone; its results are the values of the last unrolled iteration. A while whose
condition depends on runtime data is left in place, and lowering reports it as unsupported.
Runs after: inline-calls.
"""

from __future__ import annotations

import logging

import numpy as np

from hlo_lowering import folding
from hlo_lowering.errors import CompileError, RESOURCE_EXHAUSTED
from hlo_lowering.ir import Block, Module, Op, Value, clone_op, replace_uses

logger = logging.getLogger(__name__)

MAX_UNROLLED_OPS = 200_000


def _emit(op: Op, mapping: dict[Value, Value], known: dict[Value, np.ndarray],
          out: list[Op]) -> None:
  """Clones `op` under `mapping` into `out`, folding it to a constant when its operands are."""
  operands = [mapping.get(v, v) for v in op.operands]
  if op.name == "stablehlo.constant":
    copy = clone_op(op, mapping)
    known[copy.result] = copy.attrs["value"]
    out.append(copy)
    return
  if operands and all(v in known for v in operands):
    value = folding.fold(op, [known[v] for v in operands])
    if value is not None:
      copy = clone_op(op, mapping)
      folded = folding.constant_op(value, copy)
      known[folded.result] = value
      out.append(folded)
      return
  out.append(clone_op(op, mapping))


def _run_region(block: Block, inputs: list[Value], known, out: list[Op]) -> list[Value]:
  mapping: dict[Value, Value] = dict(zip(block.args, inputs))
  for op in block.ops[:-1]:
    _emit(op, mapping, known, out)
  return [mapping.get(v, v) for v in block.terminator.operands]


def _unroll(loop: Op, known: dict[Value, np.ndarray],
            budget: list[int]) -> tuple[list[Op], list[Value]] | None:
  """(ops of every iteration, final loop-carried values), or None if the trip count is not
  known at compile time."""
  cond, body = loop.regions[0].block, loop.regions[1].block
  current = list(loop.operands)
  out: list[Op] = []
  while True:
    cond_ops: list[Op] = []
    (flag,) = _run_region(cond, current, known, cond_ops)
    if flag not in known:
      return None
    if not bool(known[flag]):
      break
    current = _run_region(body, current, known, out)
    budget[0] -= len(body.ops)
    if budget[0] < 0:
      raise CompileError(f"stablehlo.while at {loop.loc}: unrolling it exceeds "
                         f"{MAX_UNROLLED_OPS} ops", RESOURCE_EXHAUSTED)
  return out, current


def _unroll_block(block: Block, budget: list[int]) -> None:
  known: dict[Value, np.ndarray] = {}
  new_ops: list[Op] = []
  replaced: dict[Value, Value] = {}
  for op in block.ops:
    op.operands = [replaced.get(v, v) for v in op.operands]
    if op.name == "stablehlo.constant":
      known[op.result] = op.attrs["value"]
    if op.name != "stablehlo.while":
      new_ops.append(op)
      continue
    unrolled = _unroll(op, known, budget)
    if unrolled is None:
      logger.info("stablehlo.while at %s has a runtime trip count; not unrolled", op.loc)
      new_ops.append(op)
      continue
    ops, final = unrolled
    new_ops.extend(ops)
    replaced.update(zip(op.results, final))
  block.ops = new_ops
  replace_uses(block, replaced)


def run(module: Module) -> None:
  budget = [MAX_UNROLLED_OPS]
  for function in module.functions.values():
    # Unrolling an outer loop can expose inner whiles with now-constant bounds: repeat.
    while True:
      before = sum(op.name == "stablehlo.while" for op in function.body.ops)
      _unroll_block(function.body, budget)
      after = sum(op.name == "stablehlo.while" for op in function.body.ops)
      if after == 0 or after == before:
        break
