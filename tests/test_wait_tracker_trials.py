"""WaitTracker trials (hlo_lowering/backend/wait_tracker.py): a rolled-back trial leaves the tracker
giving every later instruction the waits it gives without the trial, and a committed trial keeps
what it fed, as feeding without a trial does."""

import random

from hlo_lowering.backend.wait_tracker import WaitTracker

STREAMS = 6


def _instructions(seed: int, n: int) -> list:
  """n random (stream, reads, writes) over a few HBM tensors and overlapping SBUF tiles, some
  narrow (one 64-byte slice), some spanning chunks."""
  rng = random.Random(seed)

  def region():
    if rng.random() < 0.3:
      return ("hbm", rng.randrange(3), None)
    p0 = rng.choice((0, 32, 64))
    b0 = rng.randrange(0, 6000, 16)
    return ("tile", 0, p0, p0 + rng.choice((32, 64, 128 - p0)), b0, b0 + rng.choice((16, 48, 3000)))

  return [(rng.randrange(STREAMS), [region() for _ in range(rng.randrange(3))],
           [region() for _ in range(rng.randrange(1, 3))]) for _ in range(n)]


def _feed(tracker, instructions) -> list:
  return [tracker.add(stream, reads, writes) for stream, reads, writes in instructions]


def test_rolled_back_trial_changes_no_later_wait():
  for seed in range(20):
    before, tried, after = (_instructions(seed * 3 + k, 60) for k in range(3))
    plain = WaitTracker(STREAMS)
    _feed(plain, before)
    expected = _feed(plain, after)
    tracker = WaitTracker(STREAMS)
    _feed(tracker, before)
    tracker.begin_trial()
    tracker.skip({1: 4, 3: 2})
    _feed(tracker, tried)
    tracker.rollback()
    assert _feed(tracker, after) == expected
    assert [tracker.length(s) for s in range(STREAMS)] == [plain.length(s) for s in range(STREAMS)]


def test_committed_trial_is_feeding_without_one():
  for seed in range(20):
    before, tried, after = (_instructions(seed * 3 + k, 60) for k in range(3))
    plain = WaitTracker(STREAMS)
    expected = _feed(plain, before) + _feed(plain, tried) + _feed(plain, after)
    tracker = WaitTracker(STREAMS)
    waits = _feed(tracker, before)
    tracker.begin_trial()
    waits += _feed(tracker, tried)
    tracker.commit()
    assert waits + _feed(tracker, after) == expected
