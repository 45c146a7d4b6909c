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

Loops, at cost O(body²), not O(iterations · body) (a loop's body here: an outermost loop's
instructions, its nested loops' once): a body instruction x of stream S conflicts with the same body
instructions at every iteration (tiles have the same addresses in every iteration; HBM conflicts are
per tensor (and split share), so moved offsets never hide one). Stream T's instructions form a count
affine in the counters of the loops: start_T + offset + Σ i_L·n_T(L), n_T(L) the T instructions one
iteration of L's body runs. For each other stream T the latest conflicting instance y is, in order:
one whose deepest loop in common with x is deepest; among those, one before x in that loop's body
(the same iteration of it, y's own loops below it at their last iteration), else one after x (the
previous iteration of that loop: for i = 0 the peeled copy's instruction, which peel-loops placed
right before the loop); the last in program order; else the latest conflicting instruction before
the loop (a constant count, from the tracker). A wait implied by what S already knows (its earlier
waits, and what a same-iteration instruction it waits for knew: affine guarantees compared term by
term) is dropped. After the loop, the tracker skips the middle iterations and is fed the last one
(the last of every nested loop) at its real positions, so the instructions after the loop see the
loop's last writes and reads.
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


class _Region:
  """An outermost loop's instructions in program order (its nested loops' once): per
  instruction its loops, its place among its stream's instructions with every counter at 0
  (`offset`), and per loop and stream the instructions one iteration of its body executes."""

  def __init__(self, body: list):
    self.body = body
    self.chains = [inst.loops() for inst in body]
    self.per_iteration = {}  # (Loop, stream) -> instructions one iteration runs
    self.offset = []
    seen, opened = {}, {}  # stream -> instructions so far; Loop -> seen when it started
    for k, inst in enumerate(body):
      previous = self.chains[k - 1] if k else []
      for loop in self.chains[k]:
        if loop not in previous:
          opened[loop] = dict(seen)
      self.offset.append(seen.get(inst.stream, 0))
      seen[inst.stream] = self.offset[-1] + 1
      after = self.chains[k + 1] if k + 1 < len(body) else []
      for loop in reversed(self.chains[k]):  # the loops ending here, innermost first
        if loop in after:
          break
        for t, n in seen.items():
          per = self.per_iteration[loop, t] = n - opened[loop].get(t, 0)
          seen[t] = n + (loop.count - 1) * per

  def n(self, loop, stream: int) -> int:
    return self.per_iteration.get((loop, stream), 0)

  def last_iterations(self, k: int, depth: int) -> int:
    """Instructions of k's stream that the last iterations of k's loops below `depth` add to
    its offset (each of those loops' earlier iterations ran before it)."""
    stream = self.body[k].stream
    return sum((loop.count - 1) * self.n(loop, stream) for loop in self.chains[k][depth:])


def _common(a: list, b: list) -> int:
  """How many loops two chains share, outermost first."""
  depth = 0
  while depth < min(len(a), len(b)) and a[depth] is b[depth]:
    depth += 1
  return depth


def _implied(forms: list, base: int, steps: dict) -> bool:
  """Whether a guarantee in `forms` ((base, {Loop: step}): completed ≥ base + Σ step·i) is
  at least base + Σ steps·i at every iteration (counters are ≥ 0)."""
  return any(b >= base and all(s.get(loop, 0) >= step for loop, step in steps.items())
             for b, s in forms)


def _with(forms: list, added: list) -> list:
  """`forms` and `added`, keeping only the guarantees no other one implies."""
  out = list(forms)
  for base, steps in added:
    if not _implied(out, base, steps):
      out = [(b, s) for b, s in out
             if not (base >= b and all(steps.get(loop, 0) >= step for loop, step in s.items()))]
      out.append((base, steps))
  return out


def _at_last(forms: list, loops: list) -> list:
  """`forms` with the counters of `loops` at their last iteration."""
  if not loops:
    return forms
  return [(b + sum(s.get(loop, 0) * (loop.count - 1) for loop in loops),
           {loop: step for loop, step in s.items() if loop not in loops}) for b, s in forms]


def _at_last_all(forms: dict, loops: list) -> dict:
  """A new dict of `forms` per stream at the last iterations of `loops` (lists shared when
  unchanged)."""
  return {t: _at_last(f, loops) for t, f in forms.items()} if loops else dict(forms)


def _loop_waits(tracker: WaitTracker, body: list) -> None:
  """The waits of one outermost loop's instructions (module docstring)."""
  region = _Region(body)
  for chain in region.chains:
    if not all(loop.peeled for loop in chain):
      raise LoopScheduleError("insert-semaphores: a loop that peel-loops has not peeled")
  start = {t: tracker.length(t) for t in range(tracker.streams)}
  acc = [accesses(inst) for inst in body]
  conflicts = _conflicts(acc)
  # Guarantees, per stream t, as forms (base, {Loop: step}): once an instruction has started at
  # iterations i, t has completed at least base + Σ step·i. closure[j]: body instruction j's (its
  # waits, and what the same-iteration instructions it waits for had started after); own[s]:
  # that of s's latest body instruction, from what s knew before the loop.
  closure: list = []
  own = {}
  for j, inst in enumerate(body):
    stream, chain = inst.stream, region.chains[j]
    waits = {}  # stream -> (rank, base, {Loop: step}, same-iteration body index or None)
    for k in conflicts[j]:
      t = body[k].stream
      if t == stream:
        continue
      depth = _common(chain, region.chains[k])
      before = k < j  # else its instance is the previous iteration of their innermost loop
      rank = (depth, before, k)
      if t in waits and waits[t][0] >= rank:
        continue
      base = start[t] + region.offset[k] + 1 + region.last_iterations(k, depth)
      if not before:
        base -= region.n(chain[depth - 1], t)
      steps = {loop: region.n(loop, t) for loop in chain[:depth] if region.n(loop, t)}
      waits[t] = (rank, base, steps, k if before else None)
    for t, count in tracker.latest(stream, *acc[j]).items():
      waits.setdefault(t, ((0,), count, {}, None))
    if stream in own:
      previous, forms = own[stream]
      forms = _at_last_all(forms, [l for l in region.chains[previous] if l not in chain])
    else:
      forms = {t: [(c, {})] for t, c in enumerate(tracker.known(stream))}
    for _, _, _, k in waits.values():
      if k is not None:
        passed = _at_last_all(closure[k], region.chains[k][_common(chain, region.chains[k]):])
        for t, f in passed.items():
          mine = forms.get(t)
          if mine is not f:  # the same guarantees (shared from before the loop): nothing new
            forms[t] = _with(mine or [], f)
    kept = {}
    for t, (_, base, steps, _) in sorted(waits.items()):
      most = base + sum(step * (loop.count - 1) for loop, step in steps.items())
      if not _implied(forms.get(t, []), base, steps) and most > 0:
        kept[t] = (base, steps)
    for t, (base, steps) in kept.items():
      forms[t] = _with(forms.get(t, []), [(base, steps)])
    inst.waits = [(t, base) for t, (base, _) in kept.items()]
    for loop in chain:
      inst.steps_of(loop)[1].clear()
    for t, (_, steps) in kept.items():
      for loop, step in steps.items():
        inst.steps_of(loop)[1][t] = step
    closure.append(forms)
    own[stream] = (j, forms)
  _feed_last_iterations(tracker, region)


def _feed_last_iterations(tracker: WaitTracker, region: _Region) -> None:
  """The instructions after the loop see its last iteration (and its nested loops' last
  iterations) at their real positions."""
  for k, inst in enumerate(region.body):
    previous = region.chains[k - 1] if k else []
    for loop in region.chains[k]:
      if loop not in previous:  # a loop starts: skip to its last iteration
        tracker.skip({t: (loop.count - 1) * n for (l, t), n in region.per_iteration.items()
                      if l is loop})
    tracker.add(inst.stream, *accesses(inst))


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
      end, top = k, insts[k].loops()[0]
      while end < len(insts) and insts[end].loops()[:1] == [top]:
        end += 1
      _loop_waits(tracker, insts[k:end])
      k = end
