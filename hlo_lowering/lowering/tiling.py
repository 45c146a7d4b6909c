"""Splitting an elementwise iteration space into SBUF tiles.

The iteration space is the result shape; every operand is a Place viewed over it (broadcast
operands have stride 0). Dims are first collapsed where every view is contiguous, so a dense op
of any shape becomes one flat run of N elements, laid out as [P partitions, N // P] plus a
remainder tile of N % P partitions × 1 (P: the target's partition count). Otherwise the
second-innermost collapsed dim goes on partitions (chunks of ≤ P) and the innermost on the free
axis (chunks of ≤ max_free), and outer dims are looped over. When the second-innermost dim has
fewer than P rows (a [heads, t·t] score tensor under a broadcast mask), the innermost dim is split
into (a ≤ P partitions, b) instead, so each tile fills the partitions while every view keeps
runs of b elements ≥ MIN_RUN_BYTES (a DMA pays per contiguous run; NKI's DMA guide: shorter runs
are overhead-bound). Each tile gives, per view, the 2-D HbmAP that feeds it.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Iterator, Sequence

from hlo_lowering.lowering.places import Place, collapse_dims
from hlo_lowering.program import HbmAP

# Contiguous bytes per partition below which a DMA is dominated by its per-run cost.
MIN_RUN_BYTES = 512


@dataclasses.dataclass(frozen=True)
class Tile:
  partitions: int
  free: int
  offsets: tuple[int, ...]                    # element offset per view
  partition_strides: tuple[int, ...]          # per view
  free_strides: tuple[int, ...]               # per view

  def hbm_ap(self, view: int, tensor: int) -> HbmAP:
    return HbmAP(tensor, self.offsets[view], ((self.partition_strides[view], self.partitions),
                                              (self.free_strides[view], self.free)))


def _flat_tiles(count: int, strides: Sequence[int], bases: Sequence[int], partitions: int,
                max_free: int) -> Iterator[Tile]:
  """Tiles over one collapsed dim of `count` elements."""
  rows = partitions if count >= partitions else count
  cols = count // rows
  for start in range(0, cols, max_free):
    free = min(max_free, cols - start)
    yield Tile(rows, free, tuple(b + start * s for b, s in zip(bases, strides)),
               tuple(cols * s for s in strides), tuple(strides))
  done = rows * cols
  if done < count:
    yield Tile(count - done, 1, tuple(b + done * s for b, s in zip(bases, strides)),
               tuple(strides), tuple(strides))


def _fill_partitions(cshape: tuple[int, ...], cstrides: list[tuple[int, ...]], partitions: int,
                     itemsize: int) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
  """The collapsed dims with the innermost split into (a, b) when the partition dim has fewer
  than `partitions` rows: the largest a ≤ `partitions` dividing it with runs of b elements of
  `itemsize` bytes still ≥ MIN_RUN_BYTES (any view's stride s becomes (s·b, s)). Unchanged when
  the rows already fill the partitions or no such split exists."""
  rows, cols = cshape[-2], cshape[-1]
  for a in range(partitions, rows, -1):
    if cols % a == 0 and cols // a * itemsize >= MIN_RUN_BYTES:
      b = cols // a
      return cshape[:-1] + (a, b), [s[:-1] + (s[-1] * b, s[-1]) for s in cstrides]
  return cshape, cstrides


def _layout(views: Sequence[Place], partitions: int):
  """(collapsed shape, per-view strides) of the common iteration space of `views`, the innermost
  dim split to fill the partitions where there are more than one dim (`_fill_partitions`)."""
  shape = views[0].shape
  if any(v.shape != shape for v in views):
    raise ValueError(f"views of different shapes: {[v.shape for v in views]}")
  cshape, cstrides = collapse_dims(shape, *(v.strides for v in views))
  if len(cshape) == 1:
    return cshape, cstrides
  return _fill_partitions(cshape, cstrides, partitions, min(v.dtype.itemsize for v in views))


def tile_grid(views: Sequence[Place], partitions: int, max_free: int) -> tuple[int, ...]:
  """The dims of the grid `tiles` walks in row-major order (their product is the tile count):
  the outer dims, then the row chunks and the free chunks of each; one dim for a flat run."""
  if any(d == 0 for d in views[0].shape):
    return (0,)
  cshape, _ = _layout(views, partitions)
  if len(cshape) == 1:
    count = cshape[0]
    rows = partitions if count >= partitions else count
    return (-(-(count // rows) // max_free) + (count % rows != 0),)
  return cshape[:-2] + (-(-cshape[-2] // partitions), -(-cshape[-1] // max_free))


def tiles(views: Sequence[Place], partitions: int, max_free: int) -> Iterator[Tile]:
  """Tiles of at most `partitions` x `max_free` covering the common shape of `views` (all the
  same shape), in row-major order over `tile_grid`."""
  if any(d == 0 for d in views[0].shape):
    return
  cshape, cstrides = _layout(views, partitions)
  base = tuple(v.offset for v in views)
  if len(cshape) == 1:
    yield from _flat_tiles(cshape[0], tuple(s[0] for s in cstrides), base, partitions, max_free)
    return
  rows, cols = cshape[-2], cshape[-1]
  for outer in itertools.product(*(range(c) for c in cshape[:-2])):
    outer_base = tuple(b + sum(i * s[k] for k, i in enumerate(outer))
                       for b, s in zip(base, cstrides))
    for r0 in range(0, rows, partitions):
      for f0 in range(0, cols, max_free):
        offsets = tuple(b + r0 * s[-2] + f0 * s[-1] for b, s in zip(outer_base, cstrides))
        yield Tile(min(partitions, rows - r0), min(max_free, cols - f0), offsets,
                   tuple(s[-2] for s in cstrides), tuple(s[-1] for s in cstrides))
