"""insert-semaphores: derives every instruction's semaphore waits from the memory it touches.

Requires: plan-memory (tiles at absolute offsets), assign-dma-queues (every instruction has its
stream) and peel-loops (every loop of two or more iterations is preceded, on each of its
streams, by a copy of its body) have run.
Ensures: every instruction's `waits` (in a loop: at every iteration, `waits` + i·`wait_steps`)
orders it after each earlier instruction of another stream of its block that it conflicts with
(read-after-write, write-after-read, write-after-write on overlapping memory), directly or
through a chain of waits, and waits only on such instructions (in a loop that steps tiles: or
on ones it is already ordered after); outside loops, no wait that one of its stream's earlier
waits or a waited-for instruction's own waits already implies (wait_tracker.py). Because every
wait is on a conflicting (or an already ordered) instruction and every conflict is ordered, a
loop runs exactly the schedule its unrolled form would. A loop that steps tiles whose waits are
not affine in its counters is unrolled (its iterations become instructions of the loop around
it; the program runs the same instructions in the same order).

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

Loops whose tiles move (format version 7's tile steps) break the first premise, so an outermost
loop holding one is fed to the tracker execution by execution, and each instruction's waits are
rolled into affine forms between its unrolled waits and what it knows at every iteration
(`_stepped_loop_waits`; docs/compiler.md). A loop around them that moves no tile repeats its
accesses each iteration, so only its first three and last two iterations are fed.
"""

from __future__ import annotations

import itertools

from hlo_lowering.backend.peel_loops import copy_iteration, replace_runs
from hlo_lowering.backend.wait_tracker import WaitTracker, bucket_keys
from hlo_lowering.program import ProgramBuilder
from hlo_lowering.program.instructions import TileStep, accesses, regions_overlap
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


# A loop that moves no tile repeats its accesses every iteration, so its waits repeat too: of
# one with more iterations than this only the first three and the last two are fed.
_SAMPLED_ITERATIONS = 5


def _sampled(loop, sampled: set) -> list:
  """The iterations of `loop` fed to the tracker: all, or (a loop in `sampled`) the first three
  and the last two."""
  if loop not in sampled or loop.count <= _SAMPLED_ITERATIONS:
    return list(range(loop.count))
  return [0, 1, 2, loop.count - 2, loop.count - 1]


def _executions(body: list, chains: list, sampled: set, depth: int = 0,
                iterations: dict | None = None):
  """(body index, {Loop: iteration}) of the executions of `body` (an outermost loop's
  instructions, or the body of a loop `depth` deep in it) fed to the tracker, in program order,
  and (None, (Loop, n)) where n iterations of a sampled loop are skipped."""
  iterations = iterations or {}
  k = 0
  while k < len(body):
    if len(chains[k]) <= depth:
      yield k, iterations
      k += 1
      continue
    loop, end = chains[k][depth], k + 1
    while end < len(body) and chains[end][depth:depth + 1] == [loop]:
      end += 1
    previous = -1
    for i in _sampled(loop, sampled):
      if i > previous + 1:
        yield None, (loop, i - previous - 1)
      previous = i
      for j, at in _executions(body[k:end], chains[k:end], sampled, depth + 1,
                               {**iterations, loop: i}):
        yield (None if j is None else k + j), at
    k = end


def _affine_fit(points: list, loops: list):
  """(base, {Loop: step}), all ≥ 0, with lo ≤ base + Σ step·i ≤ hi at every point
  (({Loop: i}, lo, hi)), or None. Steps are tried from the differences along each counter."""
  origin = {tuple(sorted((id(l), i) for l, i in at.items() if i)): (lo, hi)
            for at, lo, hi in points}
  choices = []
  for loop in loops:
    zero, unit = origin.get(()), origin.get(((id(loop), 1),))
    options = [0]
    if zero is not None and unit is not None:
      options = [unit[0] - zero[0], unit[1] - zero[1], 0]
    choices.append(sorted({o for o in options if o >= 0}, key=options.index)[:3 if len(loops) <= 3
                                                                             else 1] or [0])
  for steps in itertools.product(*choices):
    base = max(lo - sum(s * at.get(l, 0) for l, s in zip(loops, steps)) for at, lo, _ in points)
    base = max(base, 0)
    if all(base + sum(s * at.get(l, 0) for l, s in zip(loops, steps)) <= hi
           for at, _, hi in points):
      return base, {l: s for l, s in zip(loops, steps) if s}
  return None


def _moves_tiles(inst, loop) -> bool:
  return any(isinstance(step, TileStep) for step in inst.steps_of(loop)[0].values())


def _stepped_loop_waits(tracker: WaitTracker, body: list) -> set:
  """The waits of one outermost loop some of whose tiles move per iteration (`tile_stepped`):
  every execution is fed to the tracker in program order, as the unrolled form would be, and
  each body instruction's waits are the affine forms (one per waited stream, a step per loop)
  that are at least its unrolled waits at every iteration (so every conflict is ordered) and at
  most what it already knows there (so it waits no longer: the schedule and modeled cycles are
  the unrolled form's). When some instruction has no such form (its unrolled waits are not affine
  in the counters), the tracker is left untouched and the loops to unroll are returned: each
  such instruction's innermost loop that moves tiles (every loop that moves tiles, for one in
  none); else an empty set."""
  chains = [inst.loops() for inst in body]
  region = _Region(body)
  moving = {loop for inst in body for loop in inst.loops() if _moves_tiles(inst, loop)}
  sampled = {loop for chain in chains for loop in chain} - moving
  tracker.begin_trial()  # rolled back if some instruction has no affine form
  seen = [[] for _ in body]  # per body instruction: ({Loop: i}, minimal waits, known after)
  # An instruction's accesses depend only on the iterations of the loops that move its tiles
  # (HBM regions are tensors): each is built once per such iterations, not once per execution
  # (a loop around them that moves none of its tiles repeats them).
  movers = [[loop for loop in chain if _moves_tiles(inst, loop)]
            for inst, chain in zip(body, chains)]
  built = {}
  for k, at in _executions(body, chains, sampled):
    if k is None:  # skipped iterations of a sampled loop
      loop, n = at
      tracker.skip({t: n * region.n(loop, t) for t in range(tracker.streams)})
      continue
    stream = body[k].stream
    key = (k, *(at[loop] for loop in movers[k]))
    acc = built.get(key)
    if acc is None:
      acc = built[key] = accesses(body[k], body[k].tile_moves(at))
    waits = dict(tracker.add(stream, *acc))
    # An execution right after skipped iterations may miss their conflicts: fed, not fitted.
    if all(at[loop] != loop.count - 2 or loop.count <= _SAMPLED_ITERATIONS
           for loop in chains[k] if loop in sampled):
      seen[k].append((at, waits, tracker.known(stream)))
  forms, unroll = [], set()
  for k, inst in enumerate(body):
    waited = sorted({t for _, waits, _ in seen[k] for t in waits})
    mine = {}
    for t in waited:
      fit = _affine_fit([(at, waits.get(t, 0), known[t]) for at, waits, known in seen[k]],
                        chains[k])
      if fit is None:
        moving = [loop for loop in chains[k] if any(_moves_tiles(i, loop) for i in body
                                                    if loop in i.loops())]
        unroll |= set(moving[-1:]) or {loop for i in body for loop in i.loops()
                                        if _moves_tiles(i, loop)}
        break
      if fit[0] or fit[1]:
        mine[t] = fit
    forms.append(mine)
  if unroll:
    tracker.rollback()
    return unroll
  tracker.commit()
  for k, inst in enumerate(body):
    inst.waits = [(t, base) for t, (base, _) in sorted(forms[k].items())]
    for loop in chains[k]:
      inst.steps_of(loop)[1].clear()
    for t, (_, steps) in forms[k].items():
      for loop, step in steps.items():
        inst.steps_of(loop)[1][t] = step
  return set()


def _unrolled(body: list, loops: set) -> list:
  """`body` with each of `loops` unrolled (its iterations as instructions of the loop around
  it; a loop inside another of them goes with it)."""
  for loop in sorted(loops, key=lambda loop: len(loop.chain())):
    k = next((k for k, inst in enumerate(body) if loop in inst.loops()), None)
    if k is None:
      continue  # inside a loop unrolled before it
    end = k
    while end < len(body) and loop in body[end].loops():
      end += 1
    body = body[:k] + [inst for i in range(loop.count)
                       for inst in copy_iteration(body[k:end], loop, i)] + body[end:]
  return body


def _block_waits(tracker: WaitTracker, insts: list, replaced: dict) -> list:
  """Gives a block's instructions (`insts`, program order) their waits; returns them, with a loop
  whose moving tiles have no affine waits unrolled (recorded in `replaced`: id of its first
  instruction -> (its length, its unrolled form))."""
  out, k = [], 0
  while k < len(insts):
    if insts[k].loop is None:
      reads, writes = accesses(insts[k])
      insts[k].waits = tracker.add(insts[k].stream, reads, writes)
      out.append(insts[k])
      k += 1
      continue
    end, top = k, insts[k].loops()[0]
    while end < len(insts) and insts[end].loops()[:1] == [top]:
      end += 1
    body = original = insts[k:end]
    # Loops whose unrolled waits are not affine are unrolled until the rest are (each try one
    # pass over the loop's executions); the last resort, every tile-moving loop unrolled.
    while any(inst.tile_stepped() for inst in body):
      unroll = _stepped_loop_waits(tracker, body)
      if not unroll:
        break
      body = _unrolled(body, unroll)
    else:
      if body is not original:
        body = _block_waits(tracker, body, {})
      else:
        _loop_waits(tracker, body)
    if body is not original:
      replaced[id(original[0])] = (len(original), body)
    out.extend(body)
    k = end
  return out


def run(builder: ProgramBuilder, target_spec: dict, report: CompileReport) -> None:
  streams = builder.num_streams()
  replaced = {}
  for block in builder.blocks:
    block.instructions = _block_waits(WaitTracker(streams), block.instructions, replaced)
  replace_runs(builder, replaced)
