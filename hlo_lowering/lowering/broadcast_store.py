"""Writing a broadcast view into a dense HBM place on chip, in long DMA runs.

A view whose innermost dim has stride 0 (a column broadcast along the rows' contiguous dim, a
splat) copied by one HBM-to-HBM DMA moves one element per contiguous run, which the DMA model
charges at ~1 % of its bandwidth (a [4096, 1024] bf16 weight gradient: ~2 ms). Instead, per
tile of the dense result (lowering/tiling.py: rows on partitions, the innermost dim on the free
axis): its distinct elements are DMA'd compactly, one per partition, into a [p, 1] SBUF tile;
VectorE copies that through a free-stride-0 access pattern into a [p, f] tile (NKI: a
broadcast operand is an access pattern, not a materialised tensor); one DMA stores the tile in
runs of f elements. A view whose innermost dim is not broadcast already moves in runs of that
dim and stays one DMA.
"""

from __future__ import annotations

import dataclasses

from hlo_lowering.lowering.core_split import emit_shares, tile_shares
from hlo_lowering.lowering.places import Place, collapse_dims
from hlo_lowering.lowering.tiling import tiles
from hlo_lowering.program import Memory, TileAP

# SBUF slots in rotation: two tiles of a step (its compact column and its broadcast tile), two
# steps apart, so a tile's load and copy overlap the previous tile's store.
_SLOTS = 4


def innermost_broadcast(dst: Place, src: Place) -> bool:
  """Whether copying `src` into `dst` (same shape) in one DMA would move one element per run:
  the innermost dim (dims merged where contiguous in both) is stride 0 in `src`."""
  if dst.size <= 1:
    return False
  shape, (_, src_strides) = collapse_dims(dst.shape, dst.strides, src.strides)
  return src_strides[-1] == 0 and shape[-1] > 1


def store_broadcast(ctx, dst: Place, src: Place) -> None:
  """dst ← src (same shape and dtype; `src` a view with stride 0 on its innermost dim) through
  SBUF: per tile a compact [p, 1] load, a VectorE stride-0 copy to [p, f], a dense store; the
  second half of the tiles on the other physical core of an LNC=2 device."""
  all_tiles = list(tiles([dst, src], ctx.partitions, ctx.sbuf.slot_bytes // dst.dtype.itemsize))
  share = tile_shares(ctx, all_tiles, 2 * dst.size * dst.dtype.itemsize)
  if share is None:
    _store_tiles(ctx, all_tiles, dst, src)
  else:
    emit_shares(ctx, [(all_tiles[:share],), (all_tiles[share:],)],
                lambda some: _store_tiles(ctx, some, dst, src))


def _store_tiles(ctx, some: list, dst: Place, src: Place) -> None:
  dtype = dst.dtype
  slots = [ctx.sbuf.take() for _ in range(_SLOTS)]
  for i, tile in enumerate(some):
    column, full = slots[2 * (i % 2)], slots[2 * (i % 2) + 1]
    compact = TileAP.dense(Memory.SBUF, dtype, 0, tile.partitions, column, (1,))
    source = tile.hbm_ap(1, src.tensor)
    ctx.dma(compact, dataclasses.replace(source, dims=(source.dims[0], (0, 1))))
    broadcast = TileAP.dense(Memory.SBUF, dtype, 0, tile.partitions, full, (tile.free,))
    ctx.builder.tensor_copy(broadcast, dataclasses.replace(compact, free=((0, tile.free),)),
                            debug=ctx.debug_id)
    ctx.dma(tile.hbm_ap(0, dst.tensor), broadcast)
