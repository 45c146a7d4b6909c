"""insert-semaphores: derives every instruction's semaphore waits from the memory it touches.

Requires: plan-memory (tiles at absolute offsets), assign-dma-queues (every instruction has its
stream) and peel-loops (every loop of two or more iterations is preceded, on each of its
streams, by a copy of its body) have run.
Ensures: every instruction's `waits` (in a loop: at every iteration, `waits` + i·`wait_steps`)
orders it after each earlier instruction of another stream of its block that it conflicts with
(read-after-write, write-after-read, write-after-write on overlapping memory), directly or
through a chain of waits, and waits only on such instructions; outside loops, no wait that one
of its stream's earlier waits or a waited-for instruction's own waits already implies
(wait_tracker.py). Because every wait is on a conflicting instruction and every conflict is
ordered, a loop runs exactly the schedule its unrolled form would.

Each block has its own semaphore counts (they restart at 0 on entry), so each block's
instructions are walked in program order with a tracker of its own.

Loops, at cost O(body²), not O(iterations · body): a body instruction x of stream S at
iteration i conflicts with the same body instructions in every iteration (tiles have the same
addresses in every iteration; HBM conflicts are per tensor (and split share), so an iteration's moved offsets
never hide one). For each other stream T the latest conflicting instruction is then, in order:
the last conflicting T instruction before x in the body (same iteration: count
start_T + i·n_T + q + 1, n_T = T's body length, q its place in T's body); else the last one
after x in the body (previous iteration: start_T + (i−1)·n_T + q + 1; for i = 0 that is the
peeled copy's instruction, which peel-loops placed right before the loop); else the latest
conflicting instruction before the loop (a constant count, from the tracker). A wait implied by
an earlier wait of S in the same iteration (larger base and step) is dropped. After the loop,
the tracker skips the middle iterations and is fed the last one at its real positions, so the
instructions after the loop see the loop's last writes and reads.
"""

from __future__ import annotations

from hlo_lowering.backend.wait_tracker import WaitTracker, bucket_keys
from hlo_lowering.program import ProgramBuilder
from hlo_lowering.program.instructions import accesses, regions_overlap
from hlo_lowering.report import CompileReport


class LoopScheduleError(ValueError):
  """A loop the stage cannot give waits: a compiler bug in the back end's order of stages."""


def _conflicts(acc: list) -> list:
  """For each body instruction, the body instructions it conflicts with (any order), found
  through region buckets so that the cost follows the accesses that can overlap."""
  readers, writers = {}, {}
  for k, (reads, writes) in enumerate(acc):
    for regions, index in ((reads, readers), (writes, writers)):
      for region in regions:
        for key in bucket_keys(region):
          index.setdefault(key, []).append((k, region))
  found = []
  for j, (reads, writes) in enumerate(acc):
    mine = set()
    for region in writes:
      for key in bucket_keys(region):
        for k, other in readers.get(key, []) + writers.get(key, []):
          if k not in mine and regions_overlap(region, other):
            mine.add(k)
    for region in reads:
      for key in bucket_keys(region):
        for k, other in writers.get(key, ()):
          if k not in mine and regions_overlap(region, other):
            mine.add(k)
    mine.discard(j)
    found.append(sorted(mine))
  return found


def _loop_waits(tracker: WaitTracker, body: list) -> None:
  loop = body[0].loop
  if not loop.peeled:
    raise LoopScheduleError("insert-semaphores: a loop that peel-loops has not peeled")
  start = {inst.stream: tracker.length(inst.stream) for inst in body}
  lengths, place = {}, []
  for inst in body:
    place.append(lengths.get(inst.stream, 0))
    lengths[inst.stream] = place[-1] + 1
  acc = [accesses(inst) for inst in body]
  conflicts = _conflicts(acc)
  # Guarantees, per stream t: once an instruction of iteration i has started, t has completed
  # fixed[t] instructions and moving[t] + n_t·i (n_t: t's body length; 0: nothing known).
  # closure[j]: body instruction j's (its waits, and what the same-iteration instructions it
  # waits for had started after); own[s]: that of s's latest body instruction, from what s knew
  # before the loop.
  closure: list = []
  own = {inst.stream: (tracker.known(inst.stream), [0] * tracker.streams) for inst in body}
  for j, inst in enumerate(body):
    stream = inst.stream
    waits = {}  # stream -> (base, moves per iteration, same-iteration body index or None)
    for k in conflicts[j]:  # ascending: the last conflicting one wins
      t = body[k].stream
      if t == stream:
        continue
      if k < j:
        waits[t] = (start[t] + place[k] + 1, True, k)
      elif t not in waits or waits[t][2] is None:
        waits[t] = (start[t] - lengths[t] + place[k] + 1, True, None)  # the previous iteration
    for t, count in tracker.latest(stream, *acc[j]).items():
      waits.setdefault(t, (count, False, None))
    fixed, moving = (list(x) for x in own[stream])
    for _, _, k in waits.values():
      if k is not None:
        fixed = list(map(max, fixed, closure[k][0]))
        moving = list(map(max, moving, closure[k][1]))
    kept = {}
    for t, (base, moves, _) in sorted(waits.items()):
      implied = moving[t] >= base or (not moves and fixed[t] >= base)
      if not implied and base + (lengths[t] if moves else 0) * (loop.count - 1) > 0:
        kept[t] = (base, moves)
    for t, (base, moves) in kept.items():
      if moves:
        moving[t] = max(moving[t], base)
      else:
        fixed[t] = max(fixed[t], base)
    inst.waits = [(t, base) for t, (base, _) in kept.items()]
    inst.wait_steps = {t: lengths[t] for t, (_, moves) in kept.items() if moves}
    closure.append((fixed, moving))
    own[stream] = (fixed, moving)
  # The instructions after the loop see its last iteration.
  tracker.skip({t: (loop.count - 1) * n for t, n in lengths.items()})
  for j, inst in enumerate(body):
    tracker.add(inst.stream, *acc[j])


def run(builder: ProgramBuilder, target_spec: dict, report: CompileReport) -> None:
  streams = builder.num_streams()
  for block in builder.blocks:
    tracker = WaitTracker(streams)
    insts, k = block.instructions, 0
    while k < len(insts):
      if insts[k].loop is None:
        reads, writes = accesses(insts[k])
        insts[k].waits = tracker.add(insts[k].stream, reads, writes)
        k += 1
        continue
      end = k
      while end < len(insts) and insts[end].loop is insts[k].loop:
        end += 1
      _loop_waits(tracker, insts[k:end])
      k = end
