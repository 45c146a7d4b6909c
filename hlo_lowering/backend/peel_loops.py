"""peel-loops: runs the first iteration of every counted loop before it, as plain instructions.

Requires: assign-dma-queues (every instruction has its stream, the copy keeps it).
Ensures: every loop has `peeled` set and at least two iterations, and on each of its streams the
instructions right before the loop's body are a copy of that body as iteration 0 runs it (same
tiles, same HBM tensors, iteration 0's offsets; a loop nested in the body is copied as a loop of
its own, itself peeled); a loop of one iteration (before or after peeling) is plain instructions
of the loop around it. What runs is unchanged: the same instructions, in the same order.

Nested loops are peeled innermost first: an outer loop's copy then holds its inner loops' peeled
form, so every loop, copies included, is preceded by its own iteration 0.

Why: insert-semaphores gives a body instruction a wait on the previous iteration's instruction of
another stream as an affine count start + (i − 1)·n; at i = 0 that count must name the same
instruction one iteration earlier, which is the peeled copy.
"""

from __future__ import annotations

import dataclasses

from hlo_lowering.program import ProgramBuilder
from hlo_lowering.program.instructions import Loop
from hlo_lowering.report import CompileReport


def _without(inst, loop: Loop, iteration: int, copies: dict):
  """`inst` as `iteration` of `loop` runs it, with `loop` taken out of its loops: the loops it
  held become copies (`copies`: original -> copy, shared by one body's instructions) nested in
  `loop`'s parent."""
  moved = inst.moved(loop, iteration)

  def copied(other: Loop) -> Loop:
    if other not in copies:
      parent = loop.parent if other.parent is loop else copied(other.parent)
      copies[other] = Loop(other.count, other.peeled, parent)
    return copies[other]

  chain = inst.loops()
  below = chain[chain.index(loop) + 1:]
  outer = {(copied(l) if l in below else l): (dict(steps), dict(waits))
           for l, (steps, waits) in inst.outer.items() if l is not loop}
  if below:
    innermost, steps, wait_steps = copied(inst.loop), dict(inst.steps), dict(inst.wait_steps)
  else:  # its innermost loop goes: the steps of the loop around it are its innermost's now
    innermost = loop.parent
    steps, wait_steps = outer.pop(innermost, ({}, {})) if innermost is not None else ({}, {})
  return dataclasses.replace(moved, operands=dict(moved.operands), loop=innermost, steps=steps,
                             wait_steps=wait_steps, outer=outer)


def _copy(body: list, loop: Loop, iteration: int) -> list:
  copies = {}
  return [_without(inst, loop, iteration, copies) for inst in body]


def _peel(loop: Loop, body: list) -> list:
  """`loop`'s body (its inner loops peeled) with the copies before or after it."""
  if loop.count == 1:
    return _copy(body, loop, 0)
  if loop.count == 2:
    return _copy(body, loop, 0) + _copy(body, loop, 1)
  before = _copy(body, loop, 0)
  for inst in body:
    inst.operands = inst.moved(loop, 1).operands
  loop.count -= 1
  loop.peeled = True
  return before + body


def _peeled(insts: list, depth: int) -> list:
  """`insts` (a block's instructions, or the body of a loop `depth` deep) with every loop
  below `depth` peeled."""
  out, k = [], 0
  while k < len(insts):
    chain = insts[k].loops()
    if len(chain) <= depth:
      out.append(insts[k])
      k += 1
      continue
    loop, end = chain[depth], k + 1
    while end < len(insts) and insts[end].loops()[depth:depth + 1] == [loop]:
      end += 1
    out.extend(_peel(loop, _peeled(insts[k:end], depth + 1)))
    k = end
  return out


def run(builder: ProgramBuilder, target_spec: dict, report: CompileReport) -> None:
  # A loop stays inside one block, and its instructions are consecutive in the builder's
  # program order too: each loop's run there is replaced by its block's new run.
  region = {}  # id(first instruction of an outermost loop) -> (its length, its peeled form)
  for block in builder.blocks:
    insts, k, rebuilt = block.instructions, 0, []
    while k < len(insts):
      end = k + 1
      if insts[k].loop is not None:
        top = insts[k].loops()[0]
        while end < len(insts) and insts[end].loops()[:1] == [top]:
          end += 1
        region[id(insts[k])] = (end - k, _peeled(insts[k:end], 0))
        rebuilt.extend(region[id(insts[k])][1])
      else:
        rebuilt.append(insts[k])
      k = end
    block.instructions = rebuilt
  order, k = [], 0
  insts = builder.instructions
  while k < len(insts):
    length, peeled = region.get(id(insts[k]), (1, [insts[k]]))
    order.extend(peeled)
    k += length
  builder.instructions = order
