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
addresses in every iteration; HBM conflicts are per tensor, so an iteration's moved offsets
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

from hlo_lowering.backend.wait_tracker import WaitTracker
from hlo_lowering.program import ProgramBuilder
from hlo_lowering.program.instructions import accesses
from hlo_lowering.report import CompileReport


class LoopScheduleError(ValueError):
  """A loop the stage cannot give waits: a compiler bug in the back end's order of stages."""


def _overlap(a, b) -> bool:
  if a[0] == "hbm" or b[0] == "hbm":
    return a == b
  return a[1] == b[1] and a[2] < b[3] and b[2] < a[3] and a[4] < b[5] and b[4] < a[5]


def _conflict(x, y) -> bool:
  (x_reads, x_writes), (y_reads, y_writes) = x, y
  return (any(_overlap(w, r) for w in x_writes for r in y_reads + y_writes)
          or any(_overlap(r, w) for r in x_reads for w in y_writes))


def _merged(*closures) -> dict:
  out: dict = {}
  for closure in closures:
    for t, by_step in closure.items():
      mine = out.setdefault(t, {})
      for step, base in by_step.items():
        mine[step] = max(mine.get(step, base), base)
  return out


def _dominated(closure: dict, stream: int, base: int, step: int) -> bool:
  """Whether `closure` already guarantees stream >= base + step·i at every iteration i >= 0."""
  return any(s >= step and b >= base for s, b in closure.get(stream, {}).items())


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
  # closure[j]: {stream: {step: base}}: once body instruction j of iteration i has started,
  # stream has completed base + step·i instructions (its waits, and what the same-iteration
  # instructions it waits for had started after). own[s]: that of s's latest body instruction,
  # from what s knew before the loop.
  closure: list = []
  own = {inst.stream: {t: {0: c} for t, c in enumerate(tracker.known(inst.stream)) if c}
         for inst in body}
  for j, inst in enumerate(body):
    stream = inst.stream
    waits = {}  # stream -> (base, step, body index of a same-iteration instruction or None)
    for k in range(j):  # ascending: the last conflicting one wins
      if body[k].stream != stream and _conflict(acc[k], acc[j]):
        waits[body[k].stream] = (start[body[k].stream] + place[k] + 1, lengths[body[k].stream], k)
    same_iteration = set(waits)
    for k in range(j + 1, len(body)):
      t = body[k].stream
      if t != stream and t not in same_iteration and _conflict(acc[k], acc[j]):
        waits[t] = (start[t] - lengths[t] + place[k] + 1, lengths[t], None)
    for t, count in tracker.latest(stream, *acc[j]).items():
      waits.setdefault(t, (count, 0, None))
    implied = _merged(own[stream], *(closure[k] for _, _, k in waits.values() if k is not None))
    kept = {t: (base, step) for t, (base, step, _) in sorted(waits.items())
            if base + step * (loop.count - 1) > 0 and not _dominated(implied, t, base, step)}
    inst.waits = [(t, base) for t, (base, _) in kept.items()]
    inst.wait_steps = {t: step for t, (_, step) in kept.items() if step}
    mine = _merged(implied, {t: {step: base} for t, (base, step) in kept.items()})
    closure.append(mine)
    own[stream] = mine
  # The instructions after the loop see its last iteration.
  tracker.skip({t: (loop.count - 1) * n for t, n in lengths.items()})
  for j, inst in enumerate(body):
    tracker.add(inst.stream, *acc[j])


def run(builder: ProgramBuilder, target_spec: dict, report: CompileReport) -> None:
  for block in builder.blocks:
    tracker = WaitTracker()
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
