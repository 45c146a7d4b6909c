"""Native lowerings of concatenate, slice and transpose as DMA copies between HBM views.

Both ops only move data: each result piece is a strided view of the result (a concatenate
operand's slot) or of the operand (a slice), so the copy is one access pattern to another. A
DMA moves long contiguous runs at the DMA engines' rate, so when the innermost dim is contiguous
on both sides and its runs are at least `MIN_RUN_BYTES` long, the copy is split along its
outermost dim into one DMA per queue (the back end's round robin spreads them), instead of one
GpSimd gp_copy (gpsimd/data_movement.py), which moves a piece at about one DMA queue's rate.
Shorter runs (a transposing or element-strided copy) stay on GpSimd: a DMA pays per run.

A transpose that is not a view (views.py) and keeps its innermost dim innermost (attention's
head split and merge, [b, t, h, d] <-> [b, h, t, d]) moves runs of that dim: with runs of at least
`MIN_TRANSPOSE_RUN_BYTES` the copy is DMAs too. Even at 64 B runs (20 % of a DMA engine's rate,
the per-run cost being 256 B of transfer) the 16 engines of the split copy move about 3x what
GpSimd's copy does through its one engine (a [16, 2048, 64] bf16 head merge: 365 us on GpSimd).

On an LNC=2 device the chunks are twice as many and the second half runs on the other physical
core's queues (lowering/core_split.py): the device's two DMA ledgers move the copy.
"""

from __future__ import annotations

import math

from hlo_lowering.ir import Op
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.core_split import emit_shares, physical_cores, tile_shares
from hlo_lowering.lowering.places import Place, collapse_dims, same_elements
from hlo_lowering.lowering.registry import register_lowering
from hlo_lowering.lowering.tiling import MIN_RUN_BYTES
from hlo_lowering.lowering.views import slice_is_view, transpose_is_view

MIN_TRANSPOSE_RUN_BYTES = 64


def _collapsed(dst: Place, src: Place) -> tuple[Place, Place]:
  """`dst` and `src` with the dims merged that are contiguous in both (same elements, order)."""
  shape, (dst_strides, src_strides) = collapse_dims(dst.shape, dst.strides, src.strides)
  return (Place(dst.tensor, dst.offset, shape, dst_strides, dst.dtype),
          Place(src.tensor, src.offset, shape, src_strides, src.dtype))


def _long_runs(dst: Place, src: Place) -> bool:
  if not dst.size:
    return True
  dst, src = _collapsed(dst, src)
  return (dst.strides[-1] == 1 and src.strides[-1] == 1
          and dst.shape[-1] * dst.dtype.itemsize >= MIN_RUN_BYTES)


def _chunks(ctx: LoweringContext, dst: Place, src: Place) -> list:
  """(dst, src) access patterns of dst ← src as one DMA per queue (of every physical core) over
  chunks of the outermost collapsed dim."""
  if not dst.size:
    return []
  dst, src = _collapsed(dst, src)
  outer, rank = dst.shape[0], len(dst.shape)
  queues = int(ctx.target_spec["dma_queues"]) * physical_cores(ctx)
  chunk = math.ceil(outer / queues) if rank > 1 else outer
  pairs = []
  for start in range(0, outer, chunk):
    starts = [start] + [0] * (rank - 1)
    counts = [min(chunk, outer - start), *dst.shape[1:]]
    ones = [1] * rank
    pairs.append((dst.sliced(starts, counts, ones).ap(), src.sliced(starts, counts, ones).ap()))
  return pairs


def _copy(ctx: LoweringContext, pieces: list[tuple[Place, Place]]) -> None:
  """Each dst ← src of `pieces` (disjoint destinations), the chunks' second half on the other
  physical core of an LNC=2 device."""
  pairs = [pair for dst, src in pieces for pair in _chunks(ctx, dst, src)]

  def emit(some):
    for dst, src in some:
      ctx.dma(dst, src)

  share = tile_shares(ctx, pairs, 2 * sum(dst.size * dst.dtype.itemsize for dst, _ in pieces))
  if share is None:
    emit(pairs)
  else:
    emit_shares(ctx, [(pairs[:share],), (pairs[share:],)], emit)


def concatenate_pieces(ctx: LoweringContext, op: Op, out: Place):
  """(result slot, operand place) per operand of a concatenate (also the GpSimd rule's pieces),
  but those already in their slot (in_place.py)."""
  axis, start = op.attrs["dimension"], 0
  for operand in op.operands:
    starts = [0] * op.result.type.rank
    starts[axis] = start
    slot = out.sliced(starts, operand.shape, [1] * len(starts))
    if not same_elements(slot, ctx.place(operand)):
      yield slot, ctx.place(operand)
    start += operand.shape[axis]


def slice_source(ctx: LoweringContext, op: Op) -> Place:
  return ctx.place(op.operands[0]).sliced(op.attrs["start_indices"], op.result.shape,
                                          op.attrs["strides"])


def _concatenate_in_long_runs(ctx: LoweringContext, op: Op) -> bool:
  out = Place.dense(0, op.result.shape, op.result.dtype)
  return all(_long_runs(slot, src) for slot, src in concatenate_pieces(ctx, op, out))


def _slice_in_long_runs(ctx: LoweringContext, op: Op) -> bool:
  if slice_is_view(ctx, op):
    return False  # views.py's rule: no data moves
  return _long_runs(Place.dense(0, op.result.shape, op.result.dtype), slice_source(ctx, op))


_DESCRIBE = f"the innermost dim contiguous on both sides in runs of >= {MIN_RUN_BYTES} B"


@register_lowering("stablehlo.concatenate", kind="native", when_placed=_concatenate_in_long_runs,
                   describe=_DESCRIBE)
def lower_concatenate(ctx: LoweringContext, op: Op) -> None:
  out = ctx.new_result(op.result)
  _copy(ctx, list(concatenate_pieces(ctx, op, out)))


@register_lowering("stablehlo.slice", kind="native", when_placed=_slice_in_long_runs,
                   describe=_DESCRIBE)
def lower_slice(ctx: LoweringContext, op: Op) -> None:
  _copy(ctx, [(ctx.new_result(op.result), slice_source(ctx, op))])


def _transposed(ctx: LoweringContext, op: Op) -> Place:
  return ctx.place(op.operands[0]).permuted(op.attrs["permutation"])


def _transpose_in_runs(ctx: LoweringContext, op: Op) -> bool:
  if transpose_is_view(ctx, op):
    return False  # views.py's rule: no data moves
  dst, src = _collapsed(Place.dense(0, op.result.shape, op.result.dtype), _transposed(ctx, op))
  return (not dst.size or src.strides[-1] == 1
          and dst.shape[-1] * dst.dtype.itemsize >= MIN_TRANSPOSE_RUN_BYTES)


@register_lowering("stablehlo.transpose", kind="native", when_placed=_transpose_in_runs,
                   describe=f"not a view, the innermost dim kept innermost, in runs of >= "
                            f"{MIN_TRANSPOSE_RUN_BYTES} B")
def lower_transpose(ctx: LoweringContext, op: Op) -> None:
  _copy(ctx, [(ctx.new_result(op.result), _transposed(ctx, op))])
