"""trn.matmul_pair (passes/pair_matmuls.py): X·B1 and Xᵀ·B2 reading each tile of X once.

X·B1 runs the resident-rhs schedule (lowering/matmul_resident.py), which stages each m-tile of
X as its rows [rows, K] and transposes them on TensorE into lhs^T. Those staged rows are already
the stationary operand of Xᵀ·B2: its contraction runs over X's rows (the partitions), and its
output rows over X's columns. So `TransposedProduct` rides on that schedule:

- with each m-tile's staging load, a DMA loads B2's rows of that m-tile ([rows, N2]);
- with each m-tile's transposes, TensorE multiplies every 128-column block of the staged rows by
  them, each block into its own PSUM accumulator [128, N2], which sums over the m-tiles in order
  (start on the first, stop on the last) — the K-accumulation order of the unpaired Xᵀ·B2,
  whose K tiles are these m-tiles, so its bits;
- after the batch's last m-tile, ScalarE and VectorE evict the accumulators (a bank each) into
  one [128, blocks · N2] tile and one DMA stores it.

Per batch the pair then reads X once instead of twice (attention's backward: dS, 134 MB at
seq 2048, 16 heads). A pair the schedule cannot take (X stored transposed, an rhs panel split
over N, operands broadcast along a dim) is lowered as its two matmuls.
"""

from __future__ import annotations

import math

from hlo_lowering.ir import Op
from hlo_lowering.lowering import matmul
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.core_split import dim_share, emit_shares, halves, physical_cores
from hlo_lowering.lowering.matmul_resident import (MIN_K_LOOP, TRANSPOSE_BANKS, ResidentRhsMatmul,
                                                   spans)
from hlo_lowering.lowering.places import Place
from hlo_lowering.lowering.registry import register_lowering
from hlo_lowering.lowering.tile_loops import loops_enabled
from hlo_lowering.program import Alu, DType, HbmAP, Memory, TileAP


class TransposedProduct:
  """Xᵀ·B2 ([B, K, N2]) from the m-tiles of X ([B, M, K]) that a ResidentRhsMatmul of X·B1
  stages: its buffers, loads, matmuls and stores (the host schedule issues the DMAs, so they
  move with its loops)."""

  def __init__(self, ctx: LoweringContext, x: Place, b2: Place, out: Place, debug: int):
    self.ctx, self.x, self.b2, self.out, self.debug = ctx, x, b2, out, debug
    self.partitions = ctx.partitions
    self.block = min(self.partitions, int(ctx.target_spec["matmul_stationary_free_max"]))
    self.blocks = spans(x.shape[2], self.block)  # its output rows: X's columns
    self.n = b2.shape[2]
    self.per_bank = ctx.psum.bank_bytes // (self.n * DType.F32.itemsize)
    self.psum_banks = math.ceil(len(self.blocks) / self.per_bank) if self.per_bank else 0
    self._rows_bytes = self.n * b2.dtype.itemsize
    self.sbuf_bytes = 2 * self._rows_bytes + len(self.blocks) * self.n * out.dtype.itemsize

  def fits(self) -> bool:
    """Whether its accumulators fit PSUM beside the host's (two at least, and its transposes)
    and every output block is whole."""
    return (self.per_bank > 0 and self.x.shape[2] % self.block == 0
            and self.psum_banks <= self.ctx.psum.count - TRANSPOSE_BANKS - 2)

  def carve(self, start, banks: list) -> None:
    """Its SBUF from `start` (sbuf_bytes per partition) and its PSUM `banks`."""
    self.rows = [start, start + self._rows_bytes]
    self.result = start + 2 * self._rows_bytes
    self.banks = banks

  def sources(self, b: int, rows) -> list[int]:
    """HBM offset of B2's rows `rows` (a Span of X's rows) in batch b."""
    sb, sm, _ = self.b2.strides
    return [self.b2.offset + b * sb + rows.start * sm]

  def load(self, rows, parity: int, source: int) -> tuple[TileAP, HbmAP]:
    """(dst, src) of the DMA of B2's rows `rows` into rows buffer `parity`."""
    _, sm, sn = self.b2.strides
    dst = TileAP(Memory.SBUF, self.b2.dtype, 0, rows.count, self.rows[parity], ((1, self.n),))
    return dst, HbmAP(self.b2.tensor, source, ((sm, rows.count), (sn, self.n)))

  def multiply(self, t: int, tiles: int, rows: int, staged, parity: int) -> None:
    """m-tile t (of `tiles`; `rows` rows staged at `staged`) into every accumulator: per bank,
    one loop stepping the stationary block and the accumulator where there are enough."""
    builder, size = self.ctx.builder, self.x.dtype.itemsize
    moving = TileAP(Memory.SBUF, self.b2.dtype, 0, rows, self.rows[parity], ((1, self.n),))
    flags = {"start": t == 0, "stop": t == tiles - 1}
    for first, count in self._bank_groups():
      bank = self.banks[first // self.per_bank]

      def product(j: int, steps=None, bank=bank, first=first) -> None:
        stationary = TileAP(Memory.SBUF, self.x.dtype, 0, rows, staged + j * self.block * size,
                            ((1, self.block),))
        dst = TileAP(Memory.PSUM, DType.F32, 0, self.block,
                     bank + (j - first) * self.n * DType.F32.itemsize, ((1, self.n),))
        builder.matmul(dst, stationary, moving, debug=self.debug, steps=steps, **flags)

      if loops_enabled() and count >= MIN_K_LOOP:
        with builder.loop(count):
          product(first, {("stationary", "byte_offset"): self.block * size,
                          ("dst", "byte_offset"): self.n * DType.F32.itemsize})
      else:
        for j in range(first, first + count):
          product(j)

  def finish(self, b: int) -> tuple[HbmAP, TileAP]:
    """Evicts every accumulator into the result tile (ScalarE and VectorE a bank each in turn,
    as the unpaired matmul's evictions round: fp32 to the output dtype once); returns the
    (dst, src) of the DMA that stores batch b's result."""
    builder, osize = self.ctx.builder, self.out.dtype.itemsize
    for first, count in self._bank_groups():
      i = first // self.per_bank
      tile = TileAP(Memory.SBUF, self.out.dtype, 0, self.block,
                    self.result + first * self.n * osize, ((1, count * self.n),))
      bank = TileAP(Memory.PSUM, DType.F32, 0, self.block, self.banks[i], ((1, count * self.n),))
      if i % 2:
        builder.activation(Alu.COPY, tile, bank, debug=self.debug)
      else:
        builder.tensor_copy(tile, bank, debug=self.debug)
    ob, om, on = self.out.strides
    blocks = len(self.blocks)
    dst = HbmAP(self.out.tensor, self.out.offset + b * ob,
                ((om, self.block), (self.block * om, blocks), (on, self.n)))
    src = TileAP(Memory.SBUF, self.out.dtype, 0, self.block, self.result,
                 ((self.n, blocks), (1, self.n)))
    return dst, src

  def _bank_groups(self) -> list[tuple[int, int]]:
    """(first block, count) of the output blocks of each PSUM bank."""
    total = len(self.blocks)
    return [(f, min(self.per_bank, total - f)) for f in range(0, total, self.per_bank)]


def _member_debug_ids(ctx: LoweringContext, dots: list[Op]) -> list[int]:
  """A debug entry per matmul of the pair ("fused", the pair's rule), so profiles name each."""
  rule = ctx.builder.debug_entries[ctx.debug_id].rule
  return [ctx.builder.debug(op=d.name, name=d.loc.name, location=d.loc.position,
                            lowering="fused", rule=rule) for d in dots]


def _paired_schedule(ctx: LoweringContext, x: Place, b1: Place, b2: Place, y1: Place, y2: Place,
                     debug: int) -> ResidentRhsMatmul | None:
  """X·B1's resident-rhs schedule carrying Xᵀ·B2, or None where it cannot: X's rows not staged
  (X stored transposed, or thin), an rhs panel split over N, too little PSUM."""
  companion = TransposedProduct(ctx, x, b2, y2, debug)
  if not companion.fits():
    return None
  plan = ResidentRhsMatmul.plan(ctx, x, b1, y1, companion=companion)
  if plan is None or plan.lhs_direct or plan.panel_blocks * plan.n_block < plan.n:
    return None
  return plan


def _shares(ctx: LoweringContext, places: tuple[Place, ...]) -> list[tuple[Place, ...]] | None:
  """The pair's places per physical core: halves of the batch on an LNC=2 device (each core's
  Xᵀ·B2 sums over all of its batches' rows), the whole on one core; None when the device would
  split a single batch (apart, each matmul splits by its own rows or columns: one core alone
  took attention's fwd+bwd of one head at seq 2048 from 448 to 539 µs)."""
  x, b1 = places[0], places[1]
  if physical_cores(ctx) < 2 or not matmul.split_pays(x, b1):
    return [places]
  cut = halves(x.shape[0], 1)
  if cut is None:
    return None
  return [tuple(dim_share(p, 0, start, count) for p in places) for start, count in cut]


@register_lowering("trn.matmul_pair", kind="native", reads_views=True,
                   describe="always (X·B1 and Xᵀ·B2 reading each tile of X once, or apart)")
def lower_matmul_pair(ctx: LoweringContext, op: Op) -> None:
  x, b1, b2 = (ctx.place(v) for v in op.operands)
  region = op.regions[0].block
  dots = [inner for inner in region.ops if inner.name == "stablehlo.dot_general"]
  # Region order is program order; results and debug entries go (X·B1, Xᵀ·B2).
  ordered = dots if dots[0].operands[0] is region.args[0] else dots[::-1]
  debug_ids = _member_debug_ids(ctx, ordered)
  xt = x.permuted((0, 2, 1))
  broadcast = any(0 in p.strides for p in (x, b1, b2))
  shares = None if broadcast else _shares(
      ctx, (x, b1, b2, ctx.new_result(op.results[0]), ctx.new_result(op.results[1])))
  plans = [_paired_schedule(ctx, *share, debug_ids[1]) for share in shares or []]
  pair_debug = ctx.debug_id
  if not plans or None in plans:
    # Apart, in program order: each as its own dot_general would be lowered.
    members = list(zip(debug_ids, (x, xt), (b1, b2), op.results))
    for debug, lhs, rhs, result in (members if ordered is dots else members[::-1]):
      ctx.debug_id = debug
      if ctx.has_place(result):
        matmul.emit_matmul(ctx, lhs, rhs, ctx.place(result))
      else:
        matmul.lower_batch_matmul(ctx, lhs, rhs, result)
    ctx.debug_id = pair_debug
    return
  ctx.debug_id = debug_ids[0]
  if len(plans) == 1:
    plans[0].emit()
  else:
    emit_shares(ctx, [(plan,) for plan in plans], lambda plan: plan.emit())
  ctx.debug_id = pair_debug
