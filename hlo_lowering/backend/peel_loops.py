"""peel-loops: runs the first iteration of every counted loop before it, as plain instructions
(a loop with rotating tile steps: its first rotation, `period` iterations).

Requires: assign-dma-queues (every instruction has its stream, the copy keeps it).
Ensures: every loop has `peeled` set and at least two iterations, and on each of its streams the
instructions right before the loop's body are copies of that body as its first iteration (or
first rotation) runs it (those iterations' tiles and HBM offsets; a loop nested in the body is
copied as a loop of its own, itself peeled), and the loop starts at the iteration after them
(offsets moved, rotating tile steps on in their rotation); a loop with no iteration left beyond
one after its peeled ones is plain instructions of the loop around it. What runs is unchanged:
the same instructions, in the same order.

Nested loops are peeled innermost first: an outer loop's copy then holds its inner loops' peeled
form, so every loop, copies included, is preceded by its own iteration 0.

Why: insert-semaphores gives a body instruction a wait on the previous iteration's instruction of
another stream as an affine count start + (i − 1)·n; at i = 0 that count must name the same
instruction one iteration earlier, which is the peeled copy (and one rotation earlier, for
a tile that rotates every `period` iterations: the peeled rotation).
"""

from __future__ import annotations

import dataclasses

from hlo_lowering.program import ProgramBuilder
from hlo_lowering.program.instructions import Loop, TileStep
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


def copy_iteration(body: list, loop: Loop, iteration: int) -> list:
  """`loop`'s body as `iteration` runs it, as instructions of the loop around it (the loops
  nested in the body: copies of their own)."""
  copies = {}
  return [_without(inst, loop, iteration, copies) for inst in body]


def _turn(loop: Loop, body: list) -> int:
  """How many iterations go before the loop: one, or a whole rotation of its rotating tiles
  (the longest period), so that each iteration's conflict with the one a period earlier is an
  instruction that ran (insert-semaphores' waits are then affine from the loop's start)."""
  return max([1] + [step.period for inst in body for step in inst.steps_of(loop)[0].values()
                    if isinstance(step, TileStep)])


def _peel(loop: Loop, body: list) -> list:
  """`loop`'s body (its inner loops peeled) with the copies before or after it."""
  peel = _turn(loop, body)
  if loop.count <= peel + 1:
    return [inst for i in range(loop.count) for inst in copy_iteration(body, loop, i)]
  before = [inst for i in range(peel) for inst in copy_iteration(body, loop, i)]
  for _ in range(peel):
    for inst in body:
      inst.advance(loop)
  loop.count -= peel
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
  replace_runs(builder, region)


def replace_runs(builder: ProgramBuilder, runs: dict) -> None:
  """builder.instructions (the program order over blocks) with each run of `runs` (id of its
  first instruction -> (its length, what replaces it)) replaced, as a stage replaced it in its
  block's list."""
  order, k = [], 0
  insts = builder.instructions
  while k < len(insts):
    length, replaced = runs.get(id(insts[k]), (1, [insts[k]]))
    order.extend(replaced)
    k += length
  builder.instructions = order
