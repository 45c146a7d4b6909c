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

import dataclasses
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


def periods_holding(period: int, tiles: int) -> int:
  """The fewest tiles that are a whole number of periods and at least `tiles`: a loop body a
  software pipeline of that many tiles in flight can fill between the drains at its ends."""
  return period * -(-tiles // period)


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


# --- loop nests over a grid of tiles --------------------------------------------------------
#
# A rule's tiles often walk a grid (heads × row blocks × free chunks) whose outer dims are not
# regular with the ring period: the [heads, t, t] scores under a [t, t] causal mask, whose head
# dim has a mask stride of 0, or a head of 16 tiles against a period of 24. A flat periodic
# prefix then stops at the first head. The nest below loops over groups of outer indices whose
# tile count is a multiple of the period (so the ring and the queues come back, as for a flat
# period), each group's indices planned the same way one level down.


@dataclasses.dataclass(frozen=True)
class Run:
  """Tiles [start, stop) as plain instructions (one software pipeline)."""
  start: int
  stop: int


@dataclasses.dataclass(frozen=True)
class Repeat:
  """A counted loop: `body` (its tiles as in iteration 0) run `count` times, iteration m on the
  tiles `m · stride` further on (`stride` a whole number of periods)."""
  count: int
  stride: int
  body: tuple


def loop_plan(tiles: Sequence[tuple[object, tuple[int, ...]]], period: int,
              grid: Sequence[int] | None = None, start: int = 0,
              stop: int | None = None) -> list:
  """Runs and loops emitting tiles [start, stop) of `tiles` ((shape, offsets) per tile, in
  row-major order over the dims `grid`; None: one flat dim) in order, with the fewest stored
  tiles: a flat periodic prefix as one loop (its rest plain) unless nesting loops over the grid's
  outer dims stores fewer. Loops of fewer than MIN_PERIODS iterations are not formed."""
  stop = len(tiles) if stop is None else stop
  grid = (len(tiles),) if grid is None else tuple(grid)
  if math.prod(grid) != len(tiles):
    raise ValueError(f"a grid of {grid} for {len(tiles)} tiles")
  return _merged(_plan_range(tiles, period, start, stop, 0, grid))


def stored_tiles(plan: Sequence) -> int:
  """Tiles a plan stores once peel-loops has run each loop's first iteration before it."""
  return sum(node.stop - node.start if isinstance(node, Run)
             else (2 if node.count > 1 else 1) * stored_tiles(node.body) for node in plan)


def emit_plan(builder, plan: Sequence, tiles: Sequence[tuple[object, tuple[int, ...]]],
              emit_run) -> None:
  """Emits `plan`: `emit_run([(tile index, steps)])` per run, steps one tuple per enclosing
  loop (outermost first) of each view's offset move per iteration, or None outside loops.
  TRN_UNROLL_LOOPS=1 emits every iteration's runs instead (the same runs, so the same
  pipelines, buffers and queues)."""
  def walk(nodes, shift, strides):
    for node in nodes:
      if isinstance(node, Run):
        emit_run([(i + shift, [_moves(tiles, i, q) for q in strides] if strides else None)
                  for i in range(node.start, node.stop)])
      elif loops_enabled():
        with builder.loop(node.count):
          walk(node.body, shift, strides + [node.stride])
      else:
        for m in range(node.count):
          walk(node.body, shift + m * node.stride, strides)
  walk(plan, 0, [])


def _moves(tiles, index: int, stride: int) -> tuple[int, ...]:
  return tuple(b - a for a, b in zip(tiles[index][1], tiles[index + stride][1]))


def _flat(tiles, period: int, lo: int, hi: int) -> list:
  """A periodic prefix of tiles [lo, hi) as one loop of one-period bodies, the rest plain."""
  periods = periodic_prefix(tiles[lo:hi], period)
  if periods < MIN_PERIODS:
    return [Run(lo, hi)]
  rest = [Run(lo + periods * period, hi)] if lo + periods * period < hi else []
  return [Repeat(periods, period, (Run(lo, lo + period),))] + rest


def _plan_grid(tiles, period: int, lo: int, grid: tuple[int, ...]) -> list:
  """The plan of the whole grid `grid` of tiles starting at `lo`."""
  hi = lo + math.prod(grid)
  flat = _flat(tiles, period, lo, hi)
  covered = sum(n.count * n.stride for n in flat if isinstance(n, Repeat))
  if len(grid) == 1 or hi - lo - covered < period:
    return flat
  inner = math.prod(grid[1:])
  group = math.lcm(inner, period) // inner  # outer indices per body: whole periods
  count = grid[0] // group
  nested, first = [], 0
  if count >= MIN_PERIODS and _uniformly_periodic(tiles[lo:hi], group * inner, count):
    body = [n for k in range(group) for n in _plan_grid(tiles, period, lo + k * inner, grid[1:])]
    nested, first = [Repeat(count, group * inner, tuple(_merged(body)))], count * group
  for k in range(first, grid[0]):
    nested += _plan_grid(tiles, period, lo + k * inner, grid[1:])
  nested = _merged(nested)
  return nested if stored_tiles(nested) < stored_tiles(flat) else flat


def _plan_range(tiles, period: int, lo: int, hi: int, base: int, grid: tuple[int, ...]) -> list:
  """The plan of tiles [lo, hi) of the grid `grid` starting at tile `base`: whole outer indices
  as one grid, the partial ones at either end one level down."""
  if (lo, hi) == (base, base + math.prod(grid)):
    return _plan_grid(tiles, period, lo, grid)
  if len(grid) == 1:
    return _flat(tiles, period, lo, hi)
  inner = math.prod(grid[1:])
  first = base + -(-(lo - base) // inner) * inner  # the first whole outer index
  last = base + (hi - base) // inner * inner       # the end of the last whole one
  if first > last:  # inside one outer index
    start = base + (lo - base) // inner * inner
    return _plan_range(tiles, period, lo, hi, start, grid[1:])
  nodes = []
  if lo < first:
    nodes += _plan_range(tiles, period, lo, first, first - inner, grid[1:])
  if first < last:
    nodes += _plan_grid(tiles, period, first, ((last - first) // inner,) + grid[1:])
  if last < hi:
    nodes += _plan_range(tiles, period, last, hi, last, grid[1:])
  return nodes


def _uniformly_periodic(tiles, stride: int, count: int) -> bool:
  """Whether `count` bodies of `stride` tiles repeat with every tile's offsets moving by the
  same steps (so a loop nested in the body keeps its own steps in every iteration)."""
  if periodic_prefix(tiles, stride) < count:
    return False
  steps = offset_steps(tiles, stride)
  return all(s == steps[0] for s in steps)


def _merged(nodes: list) -> list:
  """Adjacent runs as one run (one pipeline, as a flat plan emits them)."""
  out = []
  for node in nodes:
    if out and isinstance(node, Run) and isinstance(out[-1], Run) and out[-1].stop == node.start:
      out[-1] = Run(out[-1].start, node.stop)
    else:
      out.append(node)
  return out
