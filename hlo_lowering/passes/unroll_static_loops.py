"""unroll-static-loops: replace a small stablehlo.while whose trip count is known at compile time
by copies of its body.

A loop left in place becomes program blocks with a branch per iteration
(lowering/control_flow.py), which costs each iteration a block barrier and a predicate read on
SP (~0.65 us, timing_model.cc) plus the copies of the loop-carried values, and keeps iterations
from overlapping; unrolled, the body's instructions of consecutive iterations overlap freely,
but the program (and compile time) grows with trips x body. So a loop is unrolled when its trip
count is at most MAX_UNROLLED_TRIPS (64: jax.random's threefry runs 5, small static fori_loops
a few dozen) and the copies total at most MAX_UNROLLED_OPS_PER_LOOP ops; a larger one (a
fori_loop of 100000 steps) stays a real loop.

Requires: calls inlined (inline-calls), so loop bodies hold no func.call.
Ensures: every while whose condition folds to a constant on each iteration (a counter that starts
at a constant and steps by a constant, as in threefry and fori_loop with static bounds) and that
fits the limits above is gone, at top level and inside the regions of the loops and branches
that remain; its results are the values of the last unrolled iteration. Other whiles (runtime
trip counts, large static ones) are left in place for the control-flow lowering.
Runs after: inline-calls.
"""

from __future__ import annotations

import logging

import numpy as np

from hlo_lowering import folding
from hlo_lowering.ir import CONTROL_FLOW, Block, Module, Op, Value, clone_op, replace_uses

logger = logging.getLogger(__name__)

MAX_UNROLLED_TRIPS = 64
MAX_UNROLLED_OPS_PER_LOOP = 20_000


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


def _unroll(loop: Op, known: dict[Value, np.ndarray]) -> tuple[list[Op], list[Value]] | None:
  """(ops of every iteration, final loop-carried values), or None if the trip count is not
  known at compile time or the loop is too large to unroll."""
  cond, body = loop.regions[0].block, loop.regions[1].block
  current = list(loop.operands)
  out: list[Op] = []
  trips = 0
  while True:
    cond_ops: list[Op] = []
    (flag,) = _run_region(cond, current, known, cond_ops)
    if flag not in known:
      return None
    if not bool(known[flag]):
      break
    trips += 1
    if trips > MAX_UNROLLED_TRIPS or len(out) + len(body.ops) > MAX_UNROLLED_OPS_PER_LOOP:
      logger.info("stablehlo.while at %s: more than %d trips or %d ops; kept as a loop",
                  loop.loc, MAX_UNROLLED_TRIPS, MAX_UNROLLED_OPS_PER_LOOP)
      return None
    current = _run_region(body, current, known, out)
  return out, current


def _unroll_block(block: Block) -> None:
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
    unrolled = _unroll(op, known)
    if unrolled is None:
      logger.info("stablehlo.while at %s is kept as a loop", op.loc)
      new_ops.append(op)
      continue
    ops, final = unrolled
    new_ops.extend(ops)
    replaced.update(zip(op.results, final))
  block.ops = new_ops
  replace_uses(block, replaced)


def _unroll_all(block: Block) -> None:
  # Unrolling an outer loop can expose inner whiles with now-constant bounds: repeat.
  while True:
    before = sum(op.name == "stablehlo.while" for op in block.ops)
    _unroll_block(block)
    after = sum(op.name == "stablehlo.while" for op in block.ops)
    if after == 0 or after == before:
      break
  for op in block.ops:
    if op.name in CONTROL_FLOW:
      for region in op.regions:
        _unroll_all(region.block)


def run(module: Module) -> None:
  for function in module.functions.values():
    _unroll_all(function.body)
