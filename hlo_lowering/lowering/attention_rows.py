"""A batch matmul inside a row fusion (passes/fuse_attention.py): attention's q·kᵀ (and dO·Vᵀ)
computed per block of score rows on TensorE and evicted into the block's row tile, so the
scores never cross HBM.

For a [B, M, K] x [B, K, N] matmul (K ≤ 128) whose (b, m) are the row fusion's rows, a block of
p rows m0.. of one batch b is one matmul per PSUM bank of output columns (start and stop: one
contraction tile) of the stationary lhs[b]ᵀ[:, m0:m0 + p] and the moving rhs[b] [K, N]:
- per batch, both operands are loaded as their rows of K elements (lhs[b]: M rows, rhs[b]ᵀ: N
  rows; 128 rows per partition group, one DMA per operand for the whole groups) and transposed
  on TensorE into a panel [K, M] and [K, N] (through PSUM, copied out by VectorE). A block whose
  batch is the previous block's (the blocks of one head) reuses the panels; two batches' panels
  alternate, so the next head's loads overlap this head's blocks;
- each output bank is evicted into the row tile in the matmul's result dtype, by VectorE or
  ScalarE as row_engines.py balances the block (a `tensor_copy`, or ScalarE's copy(x · 1): one
  rounding of the fp32 sum, the same bits; PSUM holds computed values, so no signalling NaN is
  quieted).
Each output element is the same K products summed in k order in fp32 and rounded once to the
result dtype as the unfused matmul computes and evicts it, so the bits are the same.

The views (`lhs_view`, `rhs_view`, `index_view`) join the row fusion's other views: the blocks'
HBM offsets and their steps in a counted loop come from them (rhs[b]'s offset moves only with
b: its stride over the rows is 0, so blocks never span two batches); `index_view` is the dense
[B, M] grid, whose offset says the block's b and m0.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import NamedTuple

from hlo_lowering.ir import Op, walk_ops
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.places import Place
from hlo_lowering.lowering.row_engines import ONE, ZERO, activate
from hlo_lowering.program import Alu, DType, HbmAP, Memory, TileAP

MATMUL = "stablehlo.dot_general"
PANELS = 2  # batches' operand panels resident at once


class RowsView(NamedTuple):
  """What a row fusion's blocking reads of a view: its HBM place (for the base offset) and its
  strides over the kept dims."""
  place: Place
  row_strides: tuple[int, ...]


def _kept_strides(kept: tuple[int, ...], batch_stride: int, row_stride: int,
                  rows: int) -> tuple[int, ...]:
  """Strides over the kept dims (the batch dims, then M, unit dims anywhere: fuse_attention
  checked it): M's dim gets `row_stride`, the batch dims `batch_stride` per batch, row-major."""
  strides, inner, step = [], True, batch_stride
  for d in reversed(kept):
    if d == 1:
      strides.append(0)
    elif inner and d == rows:
      strides.append(row_stride)
      inner = False
    else:
      strides.append(step)
      step *= d
  return tuple(reversed(strides))


class _Operand(NamedTuple):
  """One operand's panel: its HBM rows of K elements and where its parts lie in a panel."""
  place: Place
  rows: int             # M (lhs) or N (rhs)
  row_stride: int       # HBM elements between rows
  k_stride: int         # HBM elements between a row's K elements
  staged: int           # panel byte offset of the [128, groups · K] row-major rows
  transposed: int       # panel byte offset of the [K, rows] transpose


class RowMatmul:
  """The plan of one matmul member: its operands' views and its SBUF and PSUM needs."""

  def __init__(self, ctx: LoweringContext, op: Op, lhs: Place, rhs: Place,
               kept: tuple[int, ...]):
    self.ctx, self.op = ctx, op
    _, self.m, self.k = lhs.shape
    self.n = rhs.shape[2]
    self.dtype = lhs.dtype
    lb, lm, lk = lhs.strides
    rb, rk, rn = rhs.strides
    self.lhs_view = RowsView(lhs, _kept_strides(kept, lb, lm, self.m))
    self.rhs_view = RowsView(rhs, _kept_strides(kept, rb, 0, self.m))
    grid = Place.dense(lhs.tensor, (lhs.shape[0], self.m), lhs.dtype)
    self.index_view = RowsView(grid, _kept_strides(kept, self.m, 1, self.m))
    size, parts, bank = self.dtype.itemsize, ctx.partitions, ctx.psum.bank_bytes
    operands, offset = [], 0
    for place, rows, row_stride, k_stride in ((lhs, self.m, lm, lk), (rhs, self.n, rn, rk)):
      staged = offset
      offset += _aligned(-(-rows // parts) * self.k * size)
      operands.append(_Operand(place, rows, row_stride, k_stride, staged, offset))
      offset += _aligned(rows * size)
    self.lhs, self.rhs = operands
    self.panel_bytes = offset
    self.per_bank = bank // (parts * size)  # transposed 128-row groups per PSUM bank
    self.n_block = min(int(ctx.target_spec["matmul_moving_free_max"]),
                       bank // DType.F32.itemsize)
    self.n_blocks = [(start, min(self.n_block, self.n - start))
                     for start in range(0, self.n, self.n_block)]
    # PSUM per block: its output banks; a panel's transposes go through the same banks.
    self.psum_banks = max(2, len(self.n_blocks))
    self.views = [self.lhs_view, self.rhs_view, self.index_view]

  def psum_sets(self, count: int, ring: int) -> int:
    """How many blocks' PSUM banks to hold at once among `count` banks: as many as fit that
    divide `ring` (the blocks' SBUF banks, whose turn picks a block's PSUM set too)."""
    fits = max(1, count // self.psum_banks)
    return max(s for s in range(1, fits + 1) if ring % s == 0)

  def emit_block(self, dst: TileAP, p: int, at: list[tuple], load: bool, panel,
                 psum: list, on_scalar: bool, debug: int) -> None:
    """The block's rows into `dst` ([p, N]). `at`: per view (HBM offset, partition stride, loop
    step or None) of this block; `load`: the panel does not hold this block's batch yet;
    `panel`: the panel's SBUF address; `psum`: this block's banks; `on_scalar`: ScalarE evicts
    (else VectorE)."""
    ctx, b = self.ctx, self.ctx.builder
    size = self.dtype.itemsize
    (lhs_offset, _, lhs_step), (rhs_offset, _, rhs_step), (index, _, _) = at
    m0 = index % self.m
    if load:
      banks = itertools.cycle(psum)
      self._load_panel(self.lhs, lhs_offset - m0 * self.lhs.row_stride, lhs_step, panel,
                       banks, debug)
      self._load_panel(self.rhs, rhs_offset, rhs_step, panel, banks, debug)
    stationary = TileAP(Memory.SBUF, self.dtype, 0, self.k,
                        panel + self.lhs.transposed + m0 * size, ((1, p),))
    for i, (start, count) in enumerate(self.n_blocks):
      out = TileAP(Memory.PSUM, DType.F32, 0, p, psum[i], ((1, count),))
      moving = TileAP(Memory.SBUF, self.dtype, 0, self.k,
                      panel + self.rhs.transposed + start * size, ((1, count),))
      b.matmul(out, stationary, moving, start=True, stop=True, debug=debug)
      if on_scalar:
        activate(ctx, Alu.COPY, _columns(dst, start, count), out, ONE, ZERO, None)
      else:
        b.tensor_copy(_columns(dst, start, count), out, debug=debug)

  def _load_panel(self, operand: _Operand, offset: int, step, panel, banks, debug: int) -> None:
    """operand[b]'s rows of K (one DMA for the whole 128-row groups, one for the rest), each
    group transposed on TensorE into the panel's [K, rows]."""
    ctx, b = self.ctx, self.ctx.builder
    size, parts = self.dtype.itemsize, ctx.partitions
    steps = {"src": step} if step is not None else None
    sr, sk = operand.row_stride, operand.k_stride
    whole = operand.rows // parts
    staged = panel + operand.staged
    if whole:
      ctx.dma(TileAP(Memory.SBUF, self.dtype, 0, parts, staged, ((self.k, whole), (1, self.k))),
              HbmAP(operand.place.tensor, offset, ((sr, parts), (parts * sr, whole),
                                                   (sk, self.k))),
              steps=steps)
    rest = operand.rows - whole * parts
    if rest:
      ctx.dma(TileAP(Memory.SBUF, self.dtype, 0, rest, staged + whole * self.k * size,
                     ((1, self.k),)),
              HbmAP(operand.place.tensor, offset + whole * parts * sr, ((sr, rest),
                                                                        (sk, self.k))),
              steps=steps)
    groups = [(start, min(parts, operand.rows - start))
              for start in range(0, operand.rows, parts)]
    for g in range(0, len(groups), self.per_bank):
      group = groups[g:g + self.per_bank]
      bank = next(banks)
      for i, (_, count) in enumerate(group):
        src = TileAP(Memory.SBUF, self.dtype, 0, count, staged + (g + i) * self.k * size,
                     ((1, self.k),))
        b.transpose(TileAP(Memory.PSUM, self.dtype, 0, self.k, bank + i * parts * size,
                           ((1, count),)), src, debug=debug)
      columns = sum(count for _, count in group)
      b.tensor_copy(TileAP(Memory.SBUF, self.dtype, 0, self.k,
                           panel + operand.transposed + group[0][0] * size, ((1, columns),)),
                    TileAP(Memory.PSUM, self.dtype, 0, self.k, bank, ((1, columns),)),
                    debug=debug)


def reads_as_matmul_operand(fusion: Op, value) -> bool:
  """Whether the row fusion `fusion` reads `value` only as its matmul member's operand, which
  emit_block loads through its access pattern (a transposed q or k stays a strided view)."""
  region = fusion.regions[0].block
  args = {arg for arg, v in zip(region.args, fusion.operands) if v is value}
  readers = [op for op in walk_ops(region) if any(a in args for a in op.operands)]
  return bool(readers) and all(op.name == MATMUL for op in readers)


def _aligned(nbytes: int) -> int:
  return -(-nbytes // 64) * 64


def _columns(tile: TileAP, start: int, count: int) -> TileAP:
  """Columns [start, start + count) of a [p, C] row tile."""
  ((stride, _),) = tile.free
  return dataclasses.replace(tile, byte_offset=tile.byte_offset + start * stride
                             * tile.dtype.itemsize, free=((stride, count),))
