"""stablehlo.dot_general on TensorE: a tiled float batch matmul [B,M,K] x [B,K,N] -> [B,M,N].

normalize-dot-general has put every dot_general in this form. TensorE computes
`psum[m, n] (+)= Σ_k stationary[k, m] · moving[k, n]` with the contraction on the partition
dimension, so per batch:

- the stationary operand is an lhs^T tile [K_t ≤ 128 partitions, M_t ≤ 128] (M_t becomes the
  output partitions). Thin tiles (M_t ≤ DMA_TRANSPOSE_MAX_ROWS) come straight from HBM with a
  transposing DMA; wider ones are loaded row-major (long contiguous runs: a transposing DMA moves
  one element per run, ~1.5 % of DMA bandwidth) and transposed on TensorE through PSUM;
  An lhs whose M dim is contiguous (`x.T @ w` reaches here as a transposed view) is loaded as
  lhs^T directly, with runs of M_t elements;
- the moving operand is an rhs tile [K_t partitions, N_t ≤ matmul_moving_free_max]. An rhs
  whose K dim is contiguous and N dim is not (`x @ w.T`: a transposed view of w) is loaded
  row-major ([N rows, K]) and transposed on TensorE, like a wide lhs tile;
- each [M_t, N_t] output tile accumulates in one PSUM bank (fp32: 512 × 4 B = one 2 KiB bank)
  over all K tiles (start on the first, stop on the last), then VectorE copies it to SBUF in
  the output dtype and a DMA stores it.

Every matmul whose full-K rhs panel of one n-block fits in SBUF runs the resident-rhs schedule
of lowering/matmul_resident.py (counted loops over m-tiles or batches). The rest (K beyond ~12 k
bf16) run the key-cached schedule here, unrolled but for each chunk's K tiles between the start
and the stop (a loop stepping their SBUF offsets): K is split in chunks whose operand panels fit
in SBUF. Panels are cached by key in rings of SBUF buffers (`_PanelCache`): an rhs panel (batch, n-block, k-chunk) is loaded once and reused
by every M tile, and the lhs^T panels (batch, m-tile, k-chunk) are transposed once and reused by
every n-block while they stay resident. Output tiles are computed in groups of GROUP PSUM banks
(two groups in flight), so the loads of the next panels and the stores of the previous group
overlap the matmuls. Products and accumulation are fp32 (docs/numerics.md).
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from hlo_lowering.ir import Op, Value
from hlo_lowering.lowering.broadcast_store import innermost_broadcast, store_broadcast
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.core_split import (MIN_SPLIT_BYTES, dim_share, emit_shares, halves,
                                              physical_cores)
from hlo_lowering.lowering.matmul_resident import (DMA_TRANSPOSE_MAX_ROWS, MIN_K_LOOP,
                                                   MatmulTiling, ResidentRhsMatmul, Span, spans)
from hlo_lowering.lowering.places import Place
from hlo_lowering.lowering.registry import register_lowering
from hlo_lowering.lowering.tile_loops import loops_enabled
from hlo_lowering.passes.normalize_dot_general import is_batch_matmul
from hlo_lowering.program import DType, HbmAP, Memory, TileAP

DOT = "stablehlo.dot_general"
TENSOR_ENGINE_DTYPES = frozenset({DType.F32, DType.BF16, DType.F16, DType.F8E4M3FN,
                                  DType.F8E5M2})
# Of the 8 PSUM banks: 6 hold output tiles accumulating (two groups of 3 in flight), 2 take
# TensorE transposes, so a transpose never lands in a bank that is still accumulating.
GROUP = 3
ACCUMULATION_BANKS = 2 * GROUP


def accepts(op: Op) -> bool:
  """Float batch matmuls whose operands TensorE multiplies (integer dots stay on GpSimd)."""
  return (is_batch_matmul(op) and all(v.dtype in TENSOR_ENGINE_DTYPES for v in op.operands)
          and op.result.dtype.is_float)


class BufferRing:
  """Equal SBUF or PSUM buffers of one lowering, handed out in rotation."""

  def __init__(self, offsets: Sequence[int]):
    self.offsets = offsets
    self._next = 0

  def take(self) -> int:
    offset = self.offsets[self._next]
    self._next = (self._next + 1) % len(self.offsets)
    return offset


class _EvenlySpaced:
  """The offsets start, start + step, … (count of them), made when asked for: a ring of small
  buffers (a matrix-vector product's) has hundreds of thousands, and building them all cost
  most of the compile time of programs with many such dots."""

  def __init__(self, start, step: int, count: int):
    self.start, self.step, self.count = start, step, count

  def __len__(self) -> int:
    return self.count

  def __getitem__(self, i: int):
    if not 0 <= i < self.count:
      raise IndexError(i)
    return self.start + i * self.step


class _PanelCache:
  """A ring of SBUF buffers holding operand panels by key: a key still resident is reused, a
  missing one is loaded by `fill(key, offset)` into the least recently filled buffer."""

  def __init__(self, offsets: Sequence[int], fill: Callable[[tuple, int], None]):
    self._ring = BufferRing(offsets)
    self._held: dict[int, tuple] = {}
    self._fill = fill

  def get(self, key: tuple) -> int:
    for offset, held in self._held.items():
      if held == key:
        return offset
    offset = self._ring.take()
    self._held[offset] = key
    self._fill(key, offset)
    return offset


class _Matmul(MatmulTiling):
  """The lowering of one batch matmul: its tiling, SBUF/PSUM buffers and emission."""

  def __init__(self, ctx: LoweringContext, lhs: Place, rhs: Place, out: Place):
    super().__init__(ctx, lhs, rhs, out)
    self.n_blocks = spans(self.n, self.n_block)
    self._plan_sbuf()
    banks = [ctx.psum.take() for _ in range(ctx.psum.count)]
    self.accumulators = BufferRing(banks[:ACCUMULATION_BANKS])
    self.transposes = BufferRing(banks[ACCUMULATION_BANKS:])

  # --- buffers ------------------------------------------------------------------------------

  def _plan_sbuf(self) -> None:
    """Carves all of SBUF into rings: 3/8 rhs panels, 3/8 lhs^T panels, 1/8 row staging for
    transposes, 1/8 output tiles. A k-chunk is as many K tiles as keep two panels in each."""
    ctx = self.ctx
    base, arena = ctx.sbuf.take_arena(), ctx.sbuf.arena_bytes
    lhs_size, rhs_size = self.lhs.dtype.itemsize, self.rhs.dtype.itemsize
    stage_size = max(lhs_size, rhs_size)
    most = min(arena * 3 // 16 // (self.n_block * rhs_size),
               arena // 16 // (self.partitions * stage_size), len(self.k_tiles))
    chunks = math.ceil(len(self.k_tiles) / max(1, most))
    per_chunk = math.ceil(len(self.k_tiles) / chunks)
    self.chunks = [self.k_tiles[c:c + per_chunk]
                   for c in range(0, len(self.k_tiles), per_chunk)]
    regions = [(arena * 3 // 8, per_chunk * self.n_block * rhs_size),
               (arena * 3 // 8, per_chunk * self.m_tile * lhs_size),
               (arena // 8, per_chunk * self.partitions * stage_size),
               (arena // 8, self.n_block * self.out.dtype.itemsize)]
    rings, start = [], base
    for region, buffer in regions:
      rings.append(_EvenlySpaced(start, buffer, region // buffer))
      start += region
    rhs_panels, lhs_panels, staging, outputs = rings
    self.rhs_panels = _PanelCache(rhs_panels, self._load_rhs)
    self.lhs_panels = _PanelCache(lhs_panels, self._load_lhs_t)
    self.staging = BufferRing(staging)
    self.outputs = BufferRing(outputs)

  # --- operand panels -----------------------------------------------------------------------

  def _sbuf(self, dtype: DType, partitions: int, offset: int, free) -> TileAP:
    return TileAP(Memory.SBUF, dtype, 0, partitions, offset, tuple(free))

  def _load_rhs(self, key: tuple, offset: int) -> None:
    """rhs[b, chunk, n-block] as one [K_t, n_block] tile per K tile."""
    b, nb, c = key
    rhs, block = self.rhs, self.n_blocks[nb]
    sb, sk, sn = rhs.strides
    if sk == 1 and sn != 1 and block.count > DMA_TRANSPOSE_MAX_ROWS:
      self._load_rhs_transposed(b, block, self.chunks[c], offset)
      return
    for i, kt in enumerate(self.chunks[c]):
      dst = self._sbuf(rhs.dtype, kt.count, offset + i * self.n_block * rhs.dtype.itemsize,
                       ((1, block.count),))
      src = HbmAP(rhs.tensor, rhs.offset + b * sb + kt.start * sk + block.start * sn,
                  ((sk, kt.count), (sn, block.count)))
      self.ctx.dma(dst, src)

  def _load_rhs_transposed(self, b: int, block: Span, chunk: list[Span], offset: int) -> None:
    """An rhs stored as [N, K] (K contiguous): rows of ≤ 128 N each loaded row-major and
    transposed on TensorE into the panel's columns."""
    rhs, size = self.rhs, self.rhs.dtype.itemsize
    sb, sk, sn = rhs.strides
    columns = sum(kt.count for kt in chunk)
    for rows in spans(block.count, self.partitions):
      stage = self.staging.take()
      self.ctx.dma(self._sbuf(rhs.dtype, rows.count, stage, ((1, columns),)),
                   HbmAP(rhs.tensor, rhs.offset + b * sb + (block.start + rows.start) * sn
                         + chunk[0].start * sk, ((sn, rows.count), (sk, columns))))
      self._transpose_chunk(chunk, rows.count, stage, offset + rows.start * size, self.n_block,
                            rhs.dtype)

  def _load_lhs_t(self, key: tuple, offset: int) -> None:
    """lhs[b, m-tile, chunk]^T as one [K_t, M_t] tile per K tile, `m_tile` elements apart."""
    b, mi, c = key
    lhs, rows, chunk = self.lhs, self.m_tiles[mi], self.chunks[c]
    sb, sm, sk = lhs.strides
    size = lhs.dtype.itemsize
    corner = lhs.offset + b * sb + rows.start * sm
    if rows.count <= DMA_TRANSPOSE_MAX_ROWS or (sm == 1 and sk != 1):
      for i, kt in enumerate(chunk):
        dst = self._sbuf(lhs.dtype, kt.count, offset + i * self.m_tile * size,
                         ((1, rows.count),))
        self.ctx.dma(dst, HbmAP(lhs.tensor, corner + kt.start * sk,
                                ((sk, kt.count), (sm, rows.count))))
      return
    columns = sum(kt.count for kt in chunk)
    stage = self.staging.take()
    self.ctx.dma(self._sbuf(lhs.dtype, rows.count, stage, ((1, columns),)),
                 HbmAP(lhs.tensor, corner + chunk[0].start * sk,
                       ((sm, rows.count), (sk, columns))))
    self._transpose_chunk(chunk, rows.count, stage, offset, self.m_tile, lhs.dtype)

  def _transpose_chunk(self, chunk: list[Span], rows: int, stage: int, dst_offset: int,
                       pitch: int, dtype: DType) -> None:
    """Transposes a staged [rows, K chunk] tile into per-K-tile [K_t, rows] tiles `pitch`
    elements apart from `dst_offset`."""
    size = dtype.itemsize
    per_bank = self.ctx.psum.bank_bytes // (pitch * size)
    i = 0
    while i < len(chunk):
      # Transposes of equal-height K tiles share a bank and one copy out of it.
      group = 1
      while (group < per_bank and i + group < len(chunk)
             and chunk[i + group].count == chunk[i].count):
        group += 1
      self._transpose_tiles(chunk[i:i + group], rows, stage + i * self.partitions * size,
                            dst_offset + i * pitch * size, pitch, dtype)
      i += group

  def _transpose_tiles(self, tiles: list[Span], rows: int, src_offset: int,
                       dst_offset: int, pitch: int, dtype: DType) -> None:
    b, debug = self.ctx.builder, self.ctx.debug_id
    height = tiles[0].count
    bank = self.transposes.take()
    for i, kt in enumerate(tiles):
      src = self._sbuf(dtype, rows, src_offset + i * self.partitions * dtype.itemsize,
                       ((1, kt.count),))
      dst = TileAP(Memory.PSUM, dtype, 0, height, bank + i * pitch * dtype.itemsize,
                   ((1, rows),))
      b.transpose(dst, src, debug=debug)
    layout = ((pitch, len(tiles)), (1, rows))
    b.tensor_copy(self._sbuf(dtype, height, dst_offset, layout),
                  TileAP(Memory.PSUM, dtype, 0, height, bank, layout), debug=debug)

  # --- output tiles -------------------------------------------------------------------------

  def emit(self) -> None:
    for b in range(self.batch):
      for nb in range(len(self.n_blocks)):
        for g in range(0, len(self.m_tiles), GROUP):
          self._emit_group(b, nb, list(range(g, min(g + GROUP, len(self.m_tiles)))))

  def _emit_group(self, b: int, nb: int, group: list[int]) -> None:
    builder, debug = self.ctx.builder, self.ctx.debug_id
    block = self.n_blocks[nb]
    banks = [self.accumulators.take() for _ in group]
    last = len(self.k_tiles) - 1
    index = 0
    for c, chunk in enumerate(self.chunks):
      rhs_offset = self.rhs_panels.get((b, nb, c))
      for bank, mi in zip(banks, group):
        rows = self.m_tiles[mi].count
        lhs_offset = self.lhs_panels.get((b, mi, c))
        steps = {("stationary", "byte_offset"): self.m_tile * self.lhs.dtype.itemsize,
                 ("moving", "byte_offset"): self.n_block * self.rhs.dtype.itemsize}

        def product(i: int, kt: Span, looped: bool = False) -> None:
          stationary = self._sbuf(self.lhs.dtype, kt.count,
                                  lhs_offset + i * steps[("stationary", "byte_offset")],
                                  ((1, rows),))
          moving = self._sbuf(self.rhs.dtype, kt.count,
                              rhs_offset + i * steps[("moving", "byte_offset")],
                              ((1, block.count),))
          dst = TileAP(Memory.PSUM, DType.F32, 0, rows, bank, ((1, block.count),))
          builder.matmul(dst, stationary, moving, start=index + i == 0,
                         stop=index + i == last, debug=debug, steps=steps if looped else None)

        # The chunk's K tiles of equal height between the accumulation's start and stop differ
        # only by their SBUF offsets: one loop (format version 7's tile steps).
        first = 1 if index == 0 else 0
        end = len(chunk) - 1 if index + len(chunk) - 1 == last else len(chunk)
        middle = range(first, end)
        if not (loops_enabled() and len(middle) >= MIN_K_LOOP
                and len({chunk[i].count for i in middle}) == 1):
          middle = range(0)
        for i, kt in enumerate(chunk):
          if i in middle:
            if i == middle.start:
              with builder.loop(len(middle)):
                product(i, kt, looped=True)
            continue
          product(i, kt)
      index += len(chunk)
    for bank, mi in zip(banks, group):
      self._store(b, self.m_tiles[mi], block, bank)

  def _store(self, b: int, rows: Span, block: Span, bank: int) -> None:
    out = self.out
    tile = self._sbuf(out.dtype, rows.count, self.outputs.take(), ((1, block.count),))
    self.ctx.builder.tensor_copy(
        tile, TileAP(Memory.PSUM, DType.F32, 0, rows.count, bank, ((1, block.count),)),
        debug=self.ctx.debug_id)
    ob, om, on = out.strides
    self.ctx.dma(HbmAP(out.tensor, out.offset + b * ob + rows.start * om + block.start * on,
                       ((om, rows.count), (on, block.count))), tile)


@register_lowering(DOT, kind="native", when=accepts, reads_views=True,
                   describe="float operands TensorE multiplies (f32, bf16, f16, fp8) and a "
                            "float result")
def lower_dot_general(ctx: LoweringContext, op: Op) -> None:
  lower_batch_matmul(ctx, ctx.place(op.operands[0]), ctx.place(op.operands[1]), op.result)


def lower_batch_matmul(ctx: LoweringContext, lhs: Place, rhs: Place, result: Value) -> None:
  """The batch matmul lhs · rhs into `result` (placed here), as a dot_general is lowered."""
  if lhs.shape[2] == 0:
    # An empty contraction: every element is 0, broadcast from one constant element.
    out = ctx.new_result(result)
    zero = ctx.constant_tensor(np.zeros((1,), out.dtype.numpy))
    ctx.dma(out.collapsed_ap(), HbmAP(zero, 0, ((0, out.size),)))
    return
  distinct = _distinct_shape(lhs, rhs)
  if distinct == result.shape:
    emit_matmul(ctx, lhs, rhs, ctx.new_result(result))
    return
  # Output elements along a broadcast dim are equal (the same products summed in the same
  # order): only the distinct ones are computed, and the result is their broadcast, stored
  # dense on chip when it is a program output.
  b, m, n = distinct
  tensor = ctx.builder.tensor(kind="temporary", dtype=result.dtype, shape=distinct,
                              name=f"t{len(ctx.builder.tensors)}")
  small = Place.dense(tensor, distinct, result.dtype)
  emit_matmul(ctx, _take(lhs, (b, m, lhs.shape[2])), _take(rhs, (b, rhs.shape[1], n)), small)
  broadcast = small.broadcast(result.shape, range(3))
  if not ctx.output_planned(result):
    ctx.set_place(result, broadcast)
  elif innermost_broadcast((out := ctx.new_result(result)), broadcast):
    store_broadcast(ctx, out, broadcast)
  else:
    ctx.dma(out.collapsed_ap(), broadcast.collapsed_ap())


def _distinct_shape(lhs: Place, rhs: Place) -> tuple[int, int, int]:
  """The output [B, M, N] with 1 on each dim along which every output element is the same: rows
  of an lhs broadcast along M (stride 0: the summed loss's cotangent in `ones @ w.T`), columns
  of an rhs broadcast along N (`x.T @ ones`), batches both operands broadcast along."""
  (batch, m, _), n = lhs.shape, rhs.shape[2]
  return (1 if lhs.strides[0] == rhs.strides[0] == 0 else batch,
          1 if lhs.strides[1] == 0 else m, 1 if rhs.strides[2] == 0 else n)


def _take(place: Place, shape: tuple[int, ...]) -> Place:
  """The leading `shape` corner of `place` (same strides)."""
  return Place(place.tensor, place.offset, shape, place.strides, place.dtype)


def emit_matmul(ctx: LoweringContext, lhs: Place, rhs: Place, out: Place) -> None:
  """One matmul into `out`, its shares on both physical cores where that pays."""
  if _transposed_vector_product(lhs, rhs):
    # xᵀ·v as (vᵀ·x)ᵀ: x streams as the moving operand in rows of M contiguous elements, v is
    # the one-column stationary; out [M, 1] and outᵀ [1, M] are the same elements. Every output
    # is the same products (x·v = v·x in IEEE) summed in the same k order: the same bits.
    lhs, rhs, out = (p.permuted((0, 2, 1)) for p in (rhs, lhs, out))
  shares = _core_shares(ctx, lhs, rhs, out)
  if shares is None:
    _emit_on_one_core(ctx, lhs, rhs, out)
  else:
    emit_shares(ctx, shares, lambda l, r, o: _emit_on_one_core(ctx, l, r, o))


def _transposed_vector_product(lhs: Place, rhs: Place) -> bool:
  """A matrix-vector product (N = 1) whose matrix is stored transposed (M contiguous, `x.T @ v`,
  a summed loss's weight gradient `h.T @ ones`): as the lhs, x would load as lhs^T in runs of
  one m-tile (256 B of bf16, half the DMA rate) and multiply one column per matmul."""
  _, sm, sk = lhs.strides
  return rhs.shape[2] == 1 and sm == 1 and sk != 1 and lhs.shape[1] > DMA_TRANSPOSE_MAX_ROWS


def _emit_on_one_core(ctx: LoweringContext, lhs: Place, rhs: Place, out: Place) -> None:
  (ResidentRhsMatmul.plan(ctx, lhs, rhs, out) or _Matmul(ctx, lhs, rhs, out)).emit()


# Below this many FLOPs (~1 us of one core's TensorE) a matmul stays on one core: the second
# core's own rhs load and the cross-core hand-off would cost more than its half saves.
MIN_SPLIT_FLOPS = 2 ** 27


# An m-tile split replaces the n-block split only when its estimate is this much shorter: the
# estimate leaves out the start-up (the first panel rows), where loading half the rhs pays.
M_SPLIT_MARGIN = 0.97


def split_pays(lhs: Place, rhs: Place) -> bool:
  """Whether lhs · rhs is worth both cores: MIN_SPLIT_FLOPS of work, or MIN_SPLIT_BYTES read
  (a matrix-vector product has few FLOPs and a matrix to stream; an operand broadcast from one
  element is no read)."""
  (batch, m, k), n = lhs.shape, rhs.shape[2]
  read = (lhs.size * lhs.dtype.itemsize * any(lhs.strides)
          + rhs.size * rhs.dtype.itemsize * any(rhs.strides))
  return 2 * batch * m * n * k >= MIN_SPLIT_FLOPS or read >= MIN_SPLIT_BYTES


def _core_shares(ctx: LoweringContext, lhs: Place, rhs: Place, out: Place):
  """[(lhs, rhs, out)] per physical core of an LNC=2 device (docs/compiler.md "Two physical
  cores"), or None to run on one: split by batches, else n-blocks (each core then loads half the
  rhs: GEMM 4096^3 bf16 91.0 % of the device against 90.7 % by m-tiles) unless m-tiles are
  estimated shorter (each core then transposes half the lhs: fp8 2048^3 85.6 % of the fp8 peak
  against 80.8 %), else m-tiles, each core's share a whole number of them (each output element
  keeps its K-accumulation order)."""
  if physical_cores(ctx) < 2 or not split_pays(lhs, rhs):
    return None
  tiling = MatmulTiling(ctx, lhs, rhs, out)
  # (unit, the dim of each of lhs, rhs, out it cuts; None: that operand is whole in each share)
  splits = {}
  for name, unit, dims in (("batch", 1, (0, 0, 0)), ("n", tiling.n_block, (None, 2, 2)),
                           ("m", tiling.m_tile, (1, None, 1))):
    cut = halves(out.shape[dims[2]], unit)
    if cut is not None:
      splits[name] = [tuple(place if dim is None else dim_share(place, dim, start, count)
                            for place, dim in zip((lhs, rhs, out), dims))
                      for start, count in cut]
  if "n" in splits and "m" in splits:
    estimates = [_estimate_ns(ctx, splits[name]) for name in ("n", "m")]
    if None not in estimates and estimates[1] < M_SPLIT_MARGIN * estimates[0]:
      del splits["n"]
  return next(iter(splits.values()), None)


def _estimate_ns(ctx: LoweringContext, shares: list[tuple[Place, Place, Place]]):
  """The longest share's estimate (ResidentRhsMatmul.estimate_ns); None where a share does not
  run the resident-rhs schedule."""
  plans = [ResidentRhsMatmul.plan(ctx, *share) for share in shares]
  return None if None in plans else max(plan.estimate_ns() for plan in plans)

