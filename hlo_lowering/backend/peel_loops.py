"""peel-loops: runs the first iteration of every counted loop before it, as plain instructions.

Requires: assign-dma-queues (every instruction has its stream, the copy keeps it).
Ensures: every loop has `peeled` set and at least two iterations, and on each of its streams the
instructions right before the loop's body are a copy of that body as iteration 0 runs it (same
tiles, same HBM tensors, iteration 0's offsets); a loop of one iteration (before or after
peeling) is plain instructions. What runs is unchanged: the same instructions, in the same order.

Why: insert-semaphores gives a body instruction a wait on the previous iteration's instruction of
another stream as an affine count start + (i − 1)·n; at i = 0 that count must name the same
instruction one iteration earlier, which is the peeled copy.
"""

from __future__ import annotations

import dataclasses

from hlo_lowering.program import ProgramBuilder
from hlo_lowering.report import CompileReport


def _copy(inst, iteration: int):
  """`inst` as `iteration` runs it, as a plain instruction."""
  moved = inst.at_iteration(iteration)
  return dataclasses.replace(moved, operands=dict(moved.operands), loop=None, steps={},
                             wait_steps={})


def _peel(body: list) -> tuple[list, list]:
  """Rewrites one loop's body in place; returns the plain instructions to put before and after."""
  loop = body[0].loop
  if loop.count == 1:
    before, after = [], []
  elif loop.count == 2:
    before, after = [], [_copy(inst, 1) for inst in body]
  else:
    before, after = [_copy(inst, 0) for inst in body], []
    for inst in body:
      inst.operands = inst.at_iteration(1).operands
    loop.count -= 1
    loop.peeled = True
    return before, after
  for inst in body:  # one or two iterations: plain instructions
    inst.loop, inst.steps = None, {}
  return before, after


def _with_copies(insts: list, before: dict, after: dict) -> list:
  out = []
  for inst in insts:
    out.extend(before.get(id(inst), ()))
    out.append(inst)
    out.extend(after.get(id(inst), ()))
  return out


def run(builder: ProgramBuilder, target_spec: dict, report: CompileReport) -> None:
  before, after = {}, {}  # id(first / last body instruction) -> copies
  for block in builder.blocks:
    insts, k = block.instructions, 0
    while k < len(insts):
      end = k + 1
      if insts[k].loop is not None:
        while end < len(insts) and insts[end].loop is insts[k].loop:
          end += 1
        first, last = insts[k], insts[end - 1]
        before[id(first)], after[id(last)] = _peel(insts[k:end])
      k = end
  for block in builder.blocks:
    block.instructions = _with_copies(block.instructions, before, after)
  builder.instructions = _with_copies(builder.instructions, before, after)
