"""stablehlo.reduce (one operand; add, max or min) on VectorE, with TensorE for cross-partition work.

The operand is viewed as [kept rows, reduced columns] (a strided view: the DMA gathers any
permutation of dims, so no data moves beforehand). Three layouts:

- rows on partitions (`_reduce_rows`): tiles of ≤ 128 kept rows × ≤ one SBUF slot of reduced
  elements; VectorE `tensor_reduce` turns each tile into a [P, 1] partial, partials of further
  column chunks are combined with `tensor_tensor`, and the [P, 1] result is stored; regular
  blocks of rows run as a counted loop over one period of its rings (lowering/tile_loops.py);
- reduced elements over partitions (`_reduce_spread`), when few rows are kept (a full reduction
  to a scalar, a reduction over almost everything): each kept row's reduced elements are laid out
  as [128, F], reduced along the free axis into one column of a [128, rows] tile of partials,
  and a TensorE transpose ([rows, 128] in PSUM) plus one `tensor_reduce` combine across
  partitions, so all 128 partitions share the work;
- reduced elements on partitions, kept columns on the free axis (`_reduce_columns_layout`), when
  a kept dim is the contiguous one (`jnp.sum(x, axis=0)`): tiles of ≤ 128 reduced elements ×
  ≤ one slot of kept columns are accumulated elementwise into an fp32 [128, F] tile with VectorE
  `tensor_tensor`, then one cross-partition step per column chunk: a TensorE matmul with a ones
  vector (float add: exact products, fp32 accumulation) or TensorE transposes + `tensor_reduce`
  (max, min, integer add).

The layout is chosen by which dim is contiguous in memory: it goes on the free axis, so each DMA
moves long contiguous runs (a DMA pays per run: one element per run is ~1.5 % of bandwidth).

On an LNC=2 device the rows and columns layouts split their kept elements between the two
physical cores (`_core_shares`): the columns layout by halves of its contiguous kept dim, the
rows layout by halves of its outermost kept dim. Every result element is reduced by the same
instructions as on one core, so the bits are the same.

Float partials are fp32 (bf16/f16 sums accumulate in fp32 and round once, as XLA's CPU backend
does after JAX's upcast); integer partials keep the operand's dtype, whose wrap-around matches
XLA's. An init value that is not the reducer's identity is combined into the result at the end.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np

from hlo_lowering.ir import Op
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.elementwise import lower_ops
from hlo_lowering.lowering.core_split import (MIN_SPLIT_BYTES, dim_share, emit_shares, halves,
                                              physical_cores)
from hlo_lowering.lowering.gpsimd.reduce import identity
from hlo_lowering.lowering.matmul import BufferRing
from hlo_lowering.lowering.places import Place, collapse_dims, row_major_strides
from hlo_lowering.lowering.registry import register_lowering
from hlo_lowering.lowering.tile_loops import (MIN_PERIODS, loops_enabled, offset_steps,
                                              periodic_prefix, tile_period)
from hlo_lowering.program import Alu, DType, HbmAP, Memory, Scalar, TileAP

REDUCERS = {"add": Alu.ADD, "max": Alu.MAX, "min": Alu.MIN}
# At most this many kept rows (and at least SPREAD_MIN_COLUMNS_PER_PARTITION reduced elements
# per row and partition) use the spread layout: a row then costs ~cols / P VectorE cycles
# instead of cols (P: the target's partitions).
SPREAD_MAX_ROWS = 64
SPREAD_MIN_COLUMNS_PER_PARTITION = 4
CELL_BYTES = 8  # one [P, 1] partial of the widest dtype


def accepts(op: Op) -> bool:
  return (len(op.operands) == 2 and op.attrs.get("reducer") in REDUCERS
          and op.operands[0].dtype != DType.F64)


def finish_partial(ctx: LoweringContext, reducer: str, init, acc: TileAP,
                   scratch: TileAP | None) -> TileAP:
  """acc combined with the reduce's init value (an IR value) when that is not the reducer's
  identity; `scratch` (acc's shape) receives a non-splat init from HBM."""
  b, debug, alu = ctx.builder, ctx.debug_id, REDUCERS[reducer]
  splat = ctx.splat(init)
  if splat is not None:
    if float(splat) != float(identity(reducer, init.dtype)) or np.isnan(splat):
      value = float(splat) if init.dtype.is_float else int(splat)
      b.tensor_scalar(alu, acc, acc, Scalar(acc.dtype, value), debug=debug)
    return acc
  place = ctx.place(init)
  free = math.prod(c for _, c in acc.free)
  ctx.dma(scratch, HbmAP(place.tensor, place.offset, ((0, acc.partition_count), (0, free))))
  b.tensor_tensor(alu, acc, acc, scratch, debug=debug)
  return acc


@dataclasses.dataclass(frozen=True)
class _Dim:
  """One collapsed dim of the operand view: element count and strides (operand, result)."""
  count: int
  stride: int
  out_stride: int = 0


def _blocks(dims: list[_Dim], limit: int):
  """Splits the index space of `dims` (outer first) into blocks of ≤ `limit` elements, each an
  access pattern: innermost dims whole while they fit, the next one chunked, outer ones looped.
  Yields (operand offset, result offset, [(stride, count)] operand, [(stride, count)] result)."""
  whole, size = len(dims), 1
  while whole > 0 and size * dims[whole - 1].count <= limit:
    whole -= 1
    size *= dims[whole].count
  inner = dims[whole:]
  if whole == 0:
    yield 0, 0, [(d.stride, d.count) for d in inner], [(d.out_stride, d.count) for d in inner]
    return
  split, outer = dims[whole - 1], dims[:whole - 1]
  step = max(1, limit // size)
  for index in itertools.product(*(range(d.count) for d in outer)):
    offset = sum(i * d.stride for i, d in zip(index, outer))
    out_offset = sum(i * d.out_stride for i, d in zip(index, outer))
    for start in range(0, split.count, step):
      count = min(step, split.count - start)
      yield (offset + start * split.stride, out_offset + start * split.out_stride,
             [(split.stride, count)] + [(d.stride, d.count) for d in inner],
             [(split.out_stride, count)] + [(d.out_stride, d.count) for d in inner])


class _Reduction:
  """The lowering of one reduce: operand view, partial dtype, SBUF buffers and emission."""

  def __init__(self, ctx: LoweringContext, op: Op, source: Place, out: Place,
               factor: Place | None = None):
    """Reduces `source` (the operand, or a view of its share) into `out` (the result's);
    `factor` (a trn.product_reduce's second factor, with source's strides): each loaded tile is
    multiplied by factor's first, rounding to the operand dtype as the multiply's tile did."""
    self.ctx, self.op = ctx, op
    self.partitions = ctx.partitions
    operand, init = op.operands[0], op.operands[-1]
    self.factor = factor
    self.reducer = op.attrs["reducer"]
    self.alu = REDUCERS[self.reducer]
    self.source = source
    self.out = out
    self.partial_dtype = DType.F32 if operand.dtype.is_float else operand.dtype
    # out's strides: the kept dims in order (a core's share is a strided view).
    self.kept, self.reduced = _view_dims(op, source, out.strides)
    self.rows = math.prod(d.count for d in self.kept)
    self.columns = math.prod(d.count for d in self.reduced)
    self.init = init
    # Tiles as wide as the wider of operand and result allow: a reduce that reads a folded
    # widening convert (fold-convert-into-reduce) cuts its work as it did over the fp32 copy,
    # so it adds in the same order.
    self.max_free = ctx.sbuf.slot_bytes // max(operand.dtype.itemsize, op.result.dtype.itemsize)
    # All SBUF slots for this op: one for the spread layout's [128, rows] partials, one cut in
    # [P, 1] cells (half for accumulators, which outlive many tiles, half for scratch), the rest
    # for operand tiles.
    arena = ctx.sbuf.take_arena()
    slots = [arena + i * ctx.sbuf.slot_bytes for i in range(ctx.sbuf.count)]
    self.partials_offset = slots[0]
    half = ctx.sbuf.slot_bytes // 2
    self.data = BufferRing(slots[2:])
    # Cell rings as long as the data ring and the DMA round robin's common period (80 on trn2,
    # far more blocks than are ever in flight), so a period of the rows layout's blocks is one
    # whole turn of every ring: its loop body (tile_loops.py).
    cells = min(half // CELL_BYTES, math.lcm(len(self.data.offsets), int(ctx.target_spec["dma_queues"])))
    self.accumulators = BufferRing([slots[1] + i * CELL_BYTES for i in range(cells)])
    self.scratch = BufferRing([slots[1] + half + i * CELL_BYTES for i in range(cells)])

  def _tile(self, dtype: DType, partitions: int, free: int, offset: int) -> TileAP:
    return TileAP(Memory.SBUF, dtype, 0, partitions, offset, ((1, free),))

  def _cell(self, partitions: int, ring: BufferRing) -> TileAP:
    return self._tile(self.partial_dtype, partitions, 1, ring.take())

  def _reduce_into(self, acc: TileAP, first: bool, src: TileAP) -> None:
    """acc = reduce(src) on the first piece, acc = acc ⊕ reduce(src) after."""
    b, debug = self.ctx.builder, self.ctx.debug_id
    if first:
      b.tensor_reduce(self.alu, acc, src, debug=debug)
      return
    part = self._cell(acc.partition_count, self.scratch)
    b.tensor_reduce(self.alu, part, src, debug=debug)
    b.tensor_tensor(self.alu, acc, acc, part, debug=debug)

  def _reduce_columns(self, acc: TileAP, base: int, partition_dims, columns: list[_Dim],
                      first: bool = True, step: int = 0) -> bool:
    """Reduces, per partition, the `columns` elements after `base` into acc; returns `first`
    for the next call (False once acc holds a value). `step`: in a loop, how far `base` moves
    per iteration."""
    for offset, _, free_dims, _ in _blocks(columns, self.max_free):
      free = math.prod(c for _, c in free_dims)
      tile = self._tile(self.source.dtype, acc.partition_count, free, self.data.take())
      self.ctx.dma(tile, HbmAP(self.source.tensor, base + offset,
                               tuple(partition_dims) + tuple(free_dims)),
                   steps={"src": step})
      self._reduce_into(acc, first, tile)
      first = False
    return first

  def _finish(self, acc: TileAP) -> TileAP:
    """acc combined with the init value when that is not the reducer's identity."""
    if self.ctx.splat(self.init) is not None:
      return finish_partial(self.ctx, self.reducer, self.init, acc, None)
    free = math.prod(c for _, c in acc.free)
    scratch = (self._cell(acc.partition_count, self.scratch) if free == 1 else
               self._tile(acc.dtype, acc.partition_count, free, self.data.take()))
    return finish_partial(self.ctx, self.reducer, self.init, acc, scratch)

  # --- layouts ------------------------------------------------------------------------------

  def _contiguous_kept_dim(self) -> int | None:
    return _contiguous_kept(self.kept, self.reduced)

  def emit(self) -> None:
    if not self.columns:
      place = self.ctx.place(self.init)
      self.ctx.dma(self.out.collapsed_ap(), HbmAP(place.tensor, place.offset,
                                                  ((0, self.out.size),)))
    elif self._contiguous_kept_dim() is not None:
      self._reduce_columns_layout(self._contiguous_kept_dim())
    elif (self.rows <= SPREAD_MAX_ROWS
          and self.columns >= SPREAD_MIN_COLUMNS_PER_PARTITION * self.partitions):
      self._reduce_spread()
    else:
      self._reduce_rows()

  def _reduce_rows(self) -> None:
    blocks = list(_blocks(self.kept, self.partitions))

    def emit(block, steps=(0, 0)):
      offset, out_offset, partition_dims, out_dims = block
      partitions = math.prod(c for _, c in partition_dims)
      acc = self._cell(partitions, self.accumulators)
      self._reduce_columns(acc, self.source.offset + offset, partition_dims, self.reduced,
                           step=steps[0])
      self._finish(acc)
      self.ctx.dma(HbmAP(self.out.tensor, self.out.offset + out_offset,
                         tuple(out_dims) + ((1, 1),)), acc, steps={"dst": steps[1]})

    # Per block: the takes of each ring and the DMAs (loads, an init load, the store).
    chunks = len(list(_blocks(self.reduced, self.max_free)))
    init_load = self.ctx.splat(self.init) is None
    period = tile_period([(1, len(self.accumulators.offsets)),
                          (chunks - 1 + init_load, len(self.scratch.offsets)),
                          (chunks, len(self.data.offsets))],
                         chunks + 1 + init_load, int(self.ctx.target_spec["dma_queues"]))
    shapes = [((tuple(p), tuple(o)), (offset, out_offset)) for offset, out_offset, p, o in blocks]
    periods = periodic_prefix(shapes, period) if loops_enabled() else 0
    rest = blocks
    if periods >= MIN_PERIODS:
      with self.ctx.builder.loop(periods):
        for block, steps in zip(blocks, offset_steps(shapes, period)):
          emit(block, steps)
      rest = blocks[periods * period:]
    for block in rest:
      emit(block)

  def _reduce_spread(self) -> None:
    # The longest reduced dim is split over partitions: 128 × q elements, then a remainder.
    longest = max(range(len(self.reduced)), key=lambda i: self.reduced[i].count)
    split = self.reduced[longest]
    others = self.reduced[:longest] + self.reduced[longest + 1:]
    q, remainder = divmod(split.count, self.partitions)
    used = self.partitions if q else remainder
    partials = self._tile(self.partial_dtype, used, self.rows, self.partials_offset)
    size = self.partial_dtype.itemsize
    rows = [0] if not self.kept else [
        sum(i * d.stride for i, d in zip(index, self.kept))
        for index in itertools.product(*(range(d.count) for d in self.kept))]
    for r, row in enumerate(rows):
      column = self._tile(self.partial_dtype, used, 1, partials.address + r * size)
      base = self.source.offset + row
      first = True
      if q:
        first = self._reduce_columns(column, base, [(split.stride * q, self.partitions)],
                                     others + [_Dim(q, split.stride)])
      if remainder:
        head = self._tile(self.partial_dtype, remainder, 1, column.address)
        piece = self._cell(remainder, self.accumulators) if not first else head
        self._reduce_columns(piece, base + q * self.partitions * split.stride,
                             [(split.stride, remainder)], others or [_Dim(1, 1)])
        if not first:
          self.ctx.builder.tensor_tensor(self.alu, head, head, piece, debug=self.ctx.debug_id)
    self._combine_partitions(partials)

  def _combine_partitions(self, partials: TileAP) -> None:
    """[used partitions, rows] → TensorE transpose → [rows, used] → reduce → [rows, 1]."""
    b, debug = self.ctx.builder, self.ctx.debug_id
    rows, used = self.rows, partials.partition_count
    transposed = TileAP(Memory.PSUM, self.partial_dtype, 0, rows, self.ctx.psum.take(),
                        ((1, used),))
    b.transpose(transposed, partials, debug=debug)
    acc = self._cell(rows, self.accumulators)
    b.tensor_reduce(self.alu, acc, transposed, debug=debug)
    self._finish(acc)
    self.ctx.dma(HbmAP(self.out.tensor, self.out.offset, ((1, rows), (1, 1))), acc)

  def _reduce_columns_layout(self, inner_index: int) -> None:
    inner = self.kept[inner_index]
    outer = self.kept[:inner_index] + self.kept[inner_index + 1:]
    width = min(inner.count, self.max_free, self.ctx.sbuf.slot_bytes // self.partial_dtype.itemsize)
    blocks = list(_blocks(self.reduced, self.partitions))
    used = math.prod(c for _, c in blocks[0][2])
    for index in itertools.product(*(range(d.count) for d in outer)):
      base = self.source.offset + sum(i * d.stride for i, d in zip(index, outer))
      out_base = self.out.offset + sum(i * d.out_stride for i, d in zip(index, outer))
      for start in range(0, inner.count, width):
        count = min(width, inner.count - start)
        acc = self._tile(self.partial_dtype, used, count, self.partials_offset)
        self._accumulate_partition_tiles(acc, base + start, blocks)
        self._combine_columns(acc, out_base + start * inner.out_stride, inner.out_stride)

  def _accumulate_partition_tiles(self, acc: TileAP, base: int, blocks) -> None:
    """acc[p, f] = ⊕ over reduced blocks of operand[block p, column f] (the first block is
    loaded straight into acc; the DMA converts to the partial dtype)."""
    b, debug = self.ctx.builder, self.ctx.debug_id
    count = acc.free[0][1]
    for k, (offset, _, partition_dims, _) in enumerate(blocks):
      partitions = math.prod(c for _, c in partition_dims)
      src = HbmAP(self.source.tensor, base + offset, tuple(partition_dims) + ((1, count),))
      if k == 0 and self.factor is None:
        self.ctx.dma(acc, src)
        continue
      tile = self._tile(self.source.dtype, partitions, count, self.data.take())
      self._load(tile, src)
      head = self._tile(acc.dtype, partitions, count, acc.address)
      if k == 0:
        b.tensor_copy(head, tile, debug=debug)  # widened exactly, as the DMA converts
      else:
        b.tensor_tensor(self.alu, head, head, tile, debug=debug)

  def _load(self, tile: TileAP, src: HbmAP) -> None:
    """tile ← src (an access pattern of source); with a factor, times factor's same elements."""
    self.ctx.dma(tile, src)
    if self.factor is None:
      return
    other = self._tile(self.factor.dtype, tile.partition_count, tile.free[0][1], self.data.take())
    offset = src.offset - self.source.offset + self.factor.offset
    self.ctx.dma(other, dataclasses.replace(src, tensor=self.factor.tensor, offset=offset))
    self.ctx.builder.tensor_tensor(Alu.MUL, tile, tile, other, debug=self.ctx.debug_id)

  def _combine_columns(self, acc: TileAP, out_offset: int, out_stride: int) -> None:
    """Reduces acc [P, F] across partitions and stores the F results."""
    b, debug = self.ctx.builder, self.ctx.debug_id
    used, count = acc.partition_count, acc.free[0][1]
    size = acc.dtype.itemsize
    if self.reducer == "add" and acc.dtype == DType.F32:
      ones = self._cell(used, self.accumulators)
      self.ctx.dma(ones, HbmAP(self.ctx.constant_tensor(np.ones((1,), np.float32)), 0,
                               ((0, used), (0, 1))))
      n_max = min(int(self.ctx.target_spec["matmul_moving_free_max"]),
                  self.ctx.psum.bank_bytes // size)
      for start in range(0, count, n_max):
        n = min(n_max, count - start)
        psum = TileAP(Memory.PSUM, DType.F32, 0, 1, self.ctx.psum.take(), ((1, n),))
        b.matmul(psum, ones, self._tile(acc.dtype, used, n, acc.address + start * size),
                 start=True, stop=True, debug=debug)
        row = self._tile(DType.F32, 1, n, self.data.take())
        b.tensor_copy(row, psum, debug=debug)
        self._finish(row)
        self.ctx.dma(HbmAP(self.out.tensor, out_offset + start * out_stride,
                           ((0, 1), (out_stride, n))), row)
      return
    for start in range(0, count, self.partitions):
      n = min(self.partitions, count - start)
      transposed = TileAP(Memory.PSUM, acc.dtype, 0, n, self.ctx.psum.take(), ((1, used),))
      b.transpose(transposed, self._tile(acc.dtype, used, n, acc.address + start * size),
                  debug=debug)
      cell = self._cell(n, self.accumulators)
      b.tensor_reduce(self.alu, cell, transposed, debug=debug)
      self._finish(cell)
      self.ctx.dma(HbmAP(self.out.tensor, out_offset + start * out_stride,
                         ((out_stride, n), (1, 1))), cell)


@register_lowering("stablehlo.reduce", kind="native", when=accepts, reads_views=True,
                   describe="one input, body add, max or min")
def lower_reduce(ctx: LoweringContext, op: Op) -> None:
  _emit(ctx, op, ctx.place(op.operands[0]), None)


@register_lowering("trn.product_reduce", kind="native", reads_views=True,
                   describe="always (each tile's factors multiplied in the columns layout, "
                            "else the product made first)")
def lower_product_reduce(ctx: LoweringContext, op: Op) -> None:
  """passes/fold_product_into_reduce.py's add-reduce of a · b. The columns layout multiplies
  each tile it loads; elsewhere (or factors of other strides) the product is made first by the
  elementwise rule, as the unfolded multiply was, and reduced."""
  a, b = (ctx.place(v) for v in op.operands[:2])
  if a.strides == b.strides and _columns_layout(op, a):
    _emit(ctx, op, a, b)
    return
  product = Op("stablehlo.multiply", op.operands[:2], [op.operands[0].type], loc=op.loc)
  lower_ops(ctx, [product], {product.result: product.result})
  _emit(ctx, op, ctx.place(product.result), None)


def _emit(ctx: LoweringContext, op: Op, source: Place, factor: Place | None) -> None:
  out = ctx.new_result(op.result)
  places = (source, out) if factor is None else (source, out, factor)
  shares = _core_shares(ctx, op, places)
  if shares is None:
    _Reduction(ctx, op, source, out, factor).emit()
  else:
    emit_shares(ctx, shares, lambda s, o, f=None: _Reduction(ctx, op, s, o, f).emit())


def _view_dims(op: Op, source: Place, out_strides) -> tuple[list[_Dim], list[_Dim]]:
  """(kept, reduced) dims of the operand view `source` (out_strides: the result's strides of
  the kept dims), each merged where contiguous."""
  reduced = list(op.attrs["dimensions"])
  kept = [d for d in range(len(source.shape)) if d not in reduced]
  shape, strides = source.shape, source.strides
  kshape, (kstrides, kout) = collapse_dims([shape[d] for d in kept],
                                           [strides[d] for d in kept], out_strides)
  rshape, (rstrides,) = collapse_dims([shape[d] for d in reduced], [strides[d] for d in reduced])
  return ([_Dim(c, s, o) for c, s, o in zip(kshape, kstrides, kout)],
          [_Dim(c, s) for c, s in zip(rshape, rstrides)])


def _contiguous_kept(kept: list[_Dim], reduced: list[_Dim]) -> int | None:
  """The kept dim with unit stride when no reduced dim has one (so reduced elements are the
  strided ones and belong on partitions: the columns layout), else None."""
  if any(d.stride == 1 for d in reduced):
    return None
  return next((i for i, d in enumerate(kept) if d.stride == 1), None)


def _columns_layout(op: Op, source: Place) -> bool:
  """Whether _Reduction.emit takes the columns layout for `source`."""
  out_strides = row_major_strides([n for d, n in enumerate(source.shape)
                                   if d not in op.attrs["dimensions"]])
  return _contiguous_kept(*_view_dims(op, source, out_strides)) is not None


def _core_shares(ctx: LoweringContext, op: Op, places: tuple[Place, ...]):
  """[(operand view, result view[, factor view])] per physical core of an LNC=2 device, or None
  to run on one: halves of the contiguous kept dim (the columns layout), else of the outermost
  kept dim of two or more elements (the rows layout); the spread layout (few rows kept) stays
  whole."""
  source, out = places[0], places[1]
  reduced = set(op.attrs["dimensions"])
  kept = [d for d in range(len(source.shape)) if d not in reduced]
  if (physical_cores(ctx) < 2 or not kept
          or source.size * op.operands[0].dtype.itemsize < MIN_SPLIT_BYTES):
    return None
  rows = math.prod(source.shape[d] for d in kept)
  contiguous = [d for d in kept if source.strides[d] == 1 and source.shape[d] > 1]
  if contiguous and not any(source.strides[d] == 1 for d in reduced if source.shape[d] > 1):
    dim, fewest = contiguous[0], 2  # a share of one column would change the layout
  else:
    dim = next((d for d in kept if source.shape[d] > 1), None)
    # Each share must keep the rows layout (the spread layout sums in another order).
    fewest = SPREAD_MAX_ROWS * source.shape[dim] // rows + 1 if dim is not None else 0
  cut = None if dim is None else halves(source.shape[dim], 1)
  if cut is None or min(count for _, count in cut) < fewest:
    return None
  at = kept.index(dim)  # the result's dims are the kept ones, in order
  return [(dim_share(source, dim, start, count), dim_share(out, at, start, count),
           *(dim_share(f, dim, start, count) for f in places[2:])) for start, count in cut]
