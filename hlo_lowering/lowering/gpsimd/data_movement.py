"""transpose, slice, reverse, concatenate and pad as gp_copy between strided HBM views (slice and
concatenate in long contiguous runs are DMA copies instead: lowering/dma_copies.py).

Each result is a fresh dense tensor; the source side is a Place view (permuted, offset, scaled
or negated strides), so every op is one gp_copy per piece; on an LNC=2 device a large piece is two,
one per physical core's GpSimd, each copying half of the result's outermost dim
(lowering/core_split.py).
"""

from __future__ import annotations

from hlo_lowering.ir import Op
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.core_split import (MIN_SPLIT_BYTES, dim_share, emit_shares, halves,
                                              physical_cores)
from hlo_lowering.lowering.dma_copies import concatenate_pieces, slice_source
from hlo_lowering.lowering.places import Place
from hlo_lowering.lowering.registry import register_lowering


def _copy(ctx: LoweringContext, pieces: list[tuple[Place, Place]]) -> None:
  """One gp_copy per (dst, src) piece (disjoint destinations); on an LNC=2 device, when the
  pieces move at least MIN_SPLIT_BYTES, each piece's halves along its outermost dim of two or
  more on the two cores."""
  pieces = [(dst, src) for dst, src in pieces if dst.size]

  def emit(some):
    for dst, src in some:
      ctx.builder.gp_copy(dst.ap(), src.ap(), debug=ctx.debug_id)

  dims = [next((d for d, n in enumerate(dst.shape) if n > 1), None) for dst, _ in pieces]
  if (physical_cores(ctx) < 2 or None in dims
      or sum(dst.size * dst.dtype.itemsize for dst, _ in pieces) < MIN_SPLIT_BYTES):
    emit(pieces)
    return
  cuts = [halves(dst.shape[d], 1) for (dst, _), d in zip(pieces, dims)]
  emit_shares(ctx, [([(dim_share(dst, d, *cut[core]), dim_share(src, d, *cut[core]))
                      for (dst, src), d, cut in zip(pieces, dims, cuts)],) for core in range(2)],
              emit)


@register_lowering("stablehlo.transpose", kind="gpsimd")
def lower_transpose(ctx: LoweringContext, op: Op) -> None:
  out = ctx.new_result(op.result)
  _copy(ctx, [(out, ctx.place(op.operands[0]).permuted(op.attrs["permutation"]))])


@register_lowering("stablehlo.slice", kind="gpsimd")
def lower_slice(ctx: LoweringContext, op: Op) -> None:
  _copy(ctx, [(ctx.new_result(op.result), slice_source(ctx, op))])


@register_lowering("stablehlo.reverse", kind="gpsimd")
def lower_reverse(ctx: LoweringContext, op: Op) -> None:
  out = ctx.new_result(op.result)
  _copy(ctx, [(out, ctx.place(op.operands[0]).reversed(op.attrs["dimensions"]))])


@register_lowering("stablehlo.concatenate", kind="gpsimd")
def lower_concatenate(ctx: LoweringContext, op: Op) -> None:
  _copy(ctx, list(concatenate_pieces(ctx, op, ctx.new_result(op.result))))


def _padded_range(size: int, low: int, interior: int, out_size: int) -> tuple[int, int, int]:
  """(first source index, count, first destination index) of the source elements that land
  inside the result along one dim; negative padding crops them."""
  step = interior + 1
  first = 0 if low >= 0 else (-low + step - 1) // step
  last = min(size - 1, (out_size - 1 - low) // step)
  return first, max(0, last - first + 1), low + first * step


@register_lowering("stablehlo.pad", kind="gpsimd")
def lower_pad(ctx: LoweringContext, op: Op) -> None:
  """Fill the result with the padding value, then copy the operand onto its strided interior."""
  out = ctx.new_result(op.result)
  operand, padding = op.operands
  if not out.size:
    return
  fill = ctx.place(padding).broadcast(op.result.shape, [])
  ctx.builder.gp_copy(out.ap(), fill.ap(), debug=ctx.debug_id)
  src_starts, counts, dst_starts, steps = [], [], [], []
  for d, size in enumerate(operand.shape):
    first, count, dst_first = _padded_range(size, op.attrs["edge_padding_low"][d],
                                            op.attrs["interior_padding"][d], op.result.shape[d])
    src_starts.append(first)
    counts.append(count)
    dst_starts.append(dst_first)
    steps.append(op.attrs["interior_padding"][d] + 1)
  if 0 in counts:
    return
  source = ctx.place(operand).sliced(src_starts, counts, [1] * len(counts))
  _copy(ctx, [(out.sliced(dst_starts, counts, steps), source)])
