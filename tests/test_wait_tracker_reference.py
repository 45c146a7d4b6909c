"""WaitTracker (hlo_lowering/backend/wait_tracker.py) gives every instruction the waits of a
reference that keeps every access and scans all of them: its region index, its reads and writes
kept apart and the accesses it forgets change no wait."""

import random

from hlo_lowering.backend.wait_tracker import WaitTracker
from hlo_lowering.program.instructions import regions_overlap

STREAMS = 5


def _instructions(seed: int, n: int) -> list:
  """n random (stream, reads, writes): HBM tensors whole or as shares of a split, and SBUF tiles
  narrow (in one 64-byte slice), a few slices wide or spanning 2 KiB chunks, on few partitions
  or all, so that accesses overlap, cover each other or only touch."""
  rng = random.Random(seed)

  def region():
    if rng.random() < 0.25:
      part = rng.choice((None, None, (7, 0), (7, 1)))
      return ("hbm", rng.randrange(3), part)
    p0 = rng.choice((0, 0, 32, 64))
    b0 = rng.randrange(0, 5000, 16)
    width = rng.choice((16, 48, 64, 128, 256, 2048, 3000))
    return ("tile", rng.randrange(2), p0, p0 + rng.choice((32, 128 - p0)), b0, b0 + width)

  return [(rng.randrange(STREAMS), [region() for _ in range(rng.randrange(3))],
           [region() for _ in range(rng.randrange(1, 3))]) for _ in range(n)]


def _reference_waits(instructions) -> list:
  """Each instruction's waits: per other stream its latest conflicting instruction, less those
  that its stream's earlier waits or a waited-for instruction's own guarantees imply."""
  history = []  # (stream, position, is_write, region) of every access
  length = [0] * STREAMS
  known = {}  # (stream, position) -> completed count of every stream once it has started
  last = [[0] * STREAMS for _ in range(STREAMS)]
  out = []
  for stream, reads, writes in instructions:
    position = length[stream] + 1
    latest = {}
    mine = [(False, r) for r in reads] + [(True, w) for w in writes]
    for s, p, was_write, other in history:
      if s != stream and any((is_write or was_write) and regions_overlap(region, other)
                             for is_write, region in mine):
        latest[s] = max(latest.get(s, 0), p)
    candidates = {s: c for s, c in latest.items() if c > last[stream][s]}
    implied = [max([known[s, c][t] for s, c in candidates.items()], default=0)
               for t in range(STREAMS)]
    out.append(sorted((s, c) for s, c in candidates.items() if c > implied[s]))
    guaranteed = [max(last[stream][t], implied[t], candidates.get(t, 0)) for t in range(STREAMS)]
    known[stream, position] = last[stream] = guaranteed
    history.extend((stream, position, is_write, region) for is_write, region in mine)
    length[stream] = position
  return out


def test_waits_are_the_keep_everything_references():
  for seed in range(30):
    instructions = _instructions(seed, 150)
    tracker = WaitTracker(STREAMS)
    got = [tracker.add(stream, reads, writes) for stream, reads, writes in instructions]
    assert got == _reference_waits(instructions), seed
