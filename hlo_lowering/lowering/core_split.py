"""Dividing one op's work between the two physical NeuronCores of an LNC=2 device.

A trn2 device at LNC=2 is two physical cores, each with its own engines, SBUF and PSUM, sharing
the device's HBM (docs/program-format.md "Physical cores"). A rule whose work falls into
independent parts along one dimension of its output (a matmul's batches, m-tiles or n-blocks;
elementwise rows) lowers each half as it would lower the whole, on a view of that half, the
second half on core 1 (`ProgramBuilder.on_core`). Each output element is then computed by the
same instruction sequence as on one core, so results are bit-identical; the back end orders the
halves against each other only where a later op reads or writes what a half wrote (the halves'
HBM writes are disjoint: one split's shares).

The target description's "lnc" (the device's physical cores, given by the PJRT client) says
whether to split; a description without it (tools, `compile_text`) is one core.
"""

from __future__ import annotations

from typing import Callable, Sequence

from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.places import Place


def physical_cores(ctx: LoweringContext) -> int:
  """How many physical cores the device has (1 or 2)."""
  return int(ctx.target_spec.get("lnc", 1))


def halves(count: int, unit: int) -> list[tuple[int, int]] | None:
  """[(start, count)] of two shares of `count` items cut at a multiple of `unit` (the larger
  share first), or None when there are fewer than two units."""
  units = -(-count // unit)
  if units < 2:
    return None
  first = -(-units // 2) * unit
  return [(0, first), (first, count - first)]


def dim_share(place: Place, dim: int, start: int, count: int) -> Place:
  """The view of `place` holding [start, start + count) of dimension `dim`."""
  starts = [0] * len(place.shape)
  counts = list(place.shape)
  starts[dim], counts[dim] = start, count
  return place.sliced(starts, counts, [1] * len(place.shape))


def emit_shares(ctx: LoweringContext, shares: Sequence[tuple], emit: Callable[..., None]) -> None:
  """Calls emit(*share) for each share, share c on physical core c, as one split."""
  split = ctx.builder.new_split()
  for core, share in enumerate(shares):
    with ctx.builder.on_core(core, split):
      emit(*share)


# Below this many bytes moved (~4 us of one core's DMA) a tiled op stays on one core.
MIN_SPLIT_BYTES = 1 << 20


def tile_shares(ctx: LoweringContext, tiles: Sequence, nbytes: int,
                weights: Sequence[int] | None = None) -> int | None:
  """Where to cut a rule's independent tiles (each reads its inputs and writes its own part of
  the outputs) between the two cores: the first count on core 0, or None to keep them on one
  core (one core, fewer than two tiles, or fewer than MIN_SPLIT_BYTES moved). With `weights`
  (each tile's work, e.g. its elements) the cut balances the work: a short last tile counts for
  what it is (the larger share first where two cuts balance equally)."""
  if physical_cores(ctx) < 2 or len(tiles) < 2 or nbytes < MIN_SPLIT_BYTES:
    return None
  if weights is None:
    return -(-len(tiles) // 2)
  total, before, best = sum(weights), 0, (None, 1)
  for cut in range(1, len(tiles)):
    before += weights[cut - 1]
    imbalance = abs(2 * before - total)
    if best[0] is None or imbalance <= best[0]:
      best = (imbalance, cut)
  return best[1]
