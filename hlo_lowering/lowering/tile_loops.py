"""Counted loops over a rule's tiles: which leading tiles repeat with a period, so a rule emits
one period as a loop body (format version 4) instead of every tile.

A rule's per-tile work takes SBUF buffers in rotation and DMA queues in round robin (the back
end's plan-memory and assign-dma-queues stages), so tile t and tile t + P run on the same
buffers and queues exactly when P tiles take a multiple of the ring's buffers and of the queue
count. One such period is the loop body: the loop then runs the very instructions, on the very
buffers and queues, that the unrolled tiles would, and so the same schedule and modeled cycles.
The HBM offsets of tile t + m·P are tile t's plus m steps when the tiling is regular there, which
`periodic_prefix` checks tile by tile (O(tiles) arithmetic, no instruction per tile). A "tile"
here is whatever a rule repeats (an elementwise tile, a reduce's block of rows), given as its
shape and its offset in each view.

TRN_UNROLL_LOOPS=1 turns loops off (every tile unrolled, as before version 4), to compare.
"""

from __future__ import annotations

import math
import os
from typing import Sequence

# A loop pays off from this many periods on (one runs as plain instructions before the loop).
MIN_PERIODS = 3


def loops_enabled() -> bool:
  """False under TRN_UNROLL_LOOPS=1 (the reference: every tile unrolled)."""
  return os.environ.get("TRN_UNROLL_LOOPS", "") in ("", "0")


def tile_period(rings: Sequence[tuple[int, int]], dmas_per_tile: int, queues: int) -> int:
  """The fewest tiles after which every buffer ring (ring buffers, takes per tile: `rings` as
  (takes, ring) pairs) and the DMA queue round robin all come back to where they were."""
  period = queues // math.gcd(dmas_per_tile, queues) if dmas_per_tile else 1
  for takes, ring in rings:
    if takes:
      period = math.lcm(period, ring // math.gcd(takes, ring))
  return period


def periodic_prefix(tiles: Sequence[tuple[object, tuple[int, ...]]], period: int) -> int:
  """How many whole periods `tiles` ((shape, offsets) per tile: anything comparable, and one
  offset per view) start with in which tile j + m·period has tile j's shape and offsets moved
  m times (tile j + period's − tile j's), for every j of the period."""
  if len(tiles) < 2 * period:
    return len(tiles) // period
  steps = offset_steps(tiles, period)
  periods = 1
  while (periods + 1) * period <= len(tiles):
    base = periods * period
    for j in range(period):
      (shape, offsets), (first_shape, first) = tiles[base + j], tiles[j]
      if shape != first_shape or offsets != tuple(
          o + periods * s for o, s in zip(first, steps[j])):
        return periods
    periods += 1
  return periods


def offset_steps(tiles: Sequence[tuple[object, tuple[int, ...]]],
                 period: int) -> list[tuple[int, ...]]:
  """Per tile of the first period: the elements each view's offset moves per period."""
  return [tuple(b - a for a, b in zip(tiles[j][1], tiles[j + period][1]))
          for j in range(period)]
