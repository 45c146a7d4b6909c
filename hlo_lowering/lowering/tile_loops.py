"""Counted loops over a rule's tiles: which leading tiles repeat with a period, so a rule emits
one period as a loop body (format version 4) instead of every tile.

A rule's per-tile work takes SBUF buffers in rotation and DMA queues in round robin (the back
end's plan-memory and assign-dma-queues stages), so tile t and tile t + P run on the same
buffers and queues exactly when P tiles take a multiple of the ring's buffers and of the queue
count. One such period is the loop body: the loop then runs the very instructions, on the very
buffers and queues, that the unrolled tiles would, and so the same schedule and modeled cycles.
The HBM offsets of tile t + m·P are tile t's plus m steps when the tiling is regular there, which
`periodic_prefix` checks tile by tile (O(tiles) arithmetic, no instruction per tile).

TRN_UNROLL_LOOPS=1 turns loops off (every tile unrolled, as before version 4), to compare.
"""

from __future__ import annotations

import math
import os
from typing import Sequence

from hlo_lowering.lowering.tiling import Tile

# A loop pays off from this many periods on (one runs as plain instructions before the loop).
MIN_PERIODS = 3


def loops_enabled() -> bool:
  """False under TRN_UNROLL_LOOPS=1 (the reference: every tile unrolled)."""
  return os.environ.get("TRN_UNROLL_LOOPS", "") in ("", "0")


def tile_period(takes_per_tile: int, ring: int, dmas_per_tile: int, queues: int) -> int:
  """The fewest tiles after which the buffer ring (`ring` buffers, `takes_per_tile` taken per
  tile) and the DMA queue round robin both come back to where they were."""
  buffers = ring // math.gcd(takes_per_tile, ring) if takes_per_tile else 1
  dmas = queues // math.gcd(dmas_per_tile, queues) if dmas_per_tile else 1
  return math.lcm(buffers, dmas)


def _same_shape(a: Tile, b: Tile) -> bool:
  return (a.partitions, a.free, a.partition_strides, a.free_strides) == (
      b.partitions, b.free, b.partition_strides, b.free_strides)


def periodic_prefix(tiles: Sequence[Tile], period: int) -> int:
  """How many whole periods the tiles start with in which tile j + m·period is tile j moved by
  m times (tile j + period's offsets − tile j's), for every j of the period."""
  if len(tiles) < 2 * period:
    return len(tiles) // period
  steps = offset_steps(tiles, period)
  periods = 1
  while (periods + 1) * period <= len(tiles):
    base = periods * period
    for j in range(period):
      tile, first = tiles[base + j], tiles[j]
      if not _same_shape(tile, first) or tile.offsets != tuple(
          o + periods * s for o, s in zip(first.offsets, steps[j])):
        return periods
    periods += 1
  return periods


def offset_steps(tiles: Sequence[Tile], period: int) -> list[tuple[int, ...]]:
  """Per tile of the first period: the elements each view's offset moves per period."""
  return [tuple(b - a for a, b in zip(tiles[j].offsets, tiles[j + period].offsets))
          for j in range(period)]
