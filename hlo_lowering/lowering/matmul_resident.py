"""The resident-rhs schedule of a batch matmul [B,M,K] x [B,K,N]: the rhs panel stays in SBUF,
the lhs streams through TensorE one m-tile at a time, as a counted loop.

The NKI matmul tutorial's blocking with the moving operand held: per batch and N panel (as many
512-column n-blocks as fit in SBUF with full K, at most MAX_PANEL_BLOCKS PSUM banks)

1. the rhs panel [K, panel] is loaded once (a [N, K]-stored rhs, `x @ w.T`, is loaded row-major
   and transposed on TensorE into it), and reused by every m-tile;
2. step s works on three m-tiles at once, so DMA, VectorE and TensorE overlap:
   - a DMA stages m-tile s+2's lhs rows [rows, K] (two staging buffers);
   - TensorE transposes m-tile s+1's staged rows through PSUM and VectorE or ScalarE (every other
     bank) copies them into lhs^T buffer (s+1) % 2 — a step ahead, so the copy overlaps m-tile s's
     matmuls;
   - TensorE multiplies m-tile s: per n-block, the K tiles in order into one PSUM bank (start on
     the first, stop on the last: the fp32 K-accumulation order of docs/numerics.md), VectorE
     evicts the bank into an output tile in the output dtype and a DMA stores it.
   (An lhs stored with M contiguous, `x.T @ w`, or of ≤ DMA_TRANSPOSE_MAX_ROWS rows is DMA-ed as
   lhs^T directly, a step ahead, with no transposes. An fp8 lhs is transposed as bf16 pairs:
   half the transposes, at the price of K tiles holding the even and the odd k of 256.)
   A panel's first two m-tiles are one step (`_pair_step`): both multiply each K tile of the
   panel as it arrives, in groups of n-blocks that fit PSUM, the panel loaded group by group.

Every buffer, PSUM bank and DMA queue of step s is chosen by the parity of s (queues here, not by
the back end's round robin), so two steps are one period of everything: the steps run as a
counted loop (lowering/tile_loops.py) whose body is two m-tiles, and the program's size stops
growing with M. Many batches (attention's heads) loop over pairs of batches instead (two rhs
panels: the next batch's loads overlap this one's matmuls), so the program's size stops growing
with the batch; a batch of enough m-tiles keeps its m-tile loop nested in that loop (per N
panel), so it stops growing with M too. Each lhs^T tile is transposed once per N panel; a GEMM whose rhs fits in one
panel transposes each lhs tile exactly once.

A `companion` (lowering/matmul_pair.py's Xᵀ·B2 of a trn.matmul_pair) rides on the staged rows:
its loads go with each m-tile's staging load, its matmuls with each m-tile's transposes, its
stores after each batch; its SBUF and PSUM banks are set aside before the panel is fitted.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.places import Place
from hlo_lowering.lowering.tile_loops import (MIN_PERIODS, loops_enabled, offset_steps,
                                              periodic_prefix)
from hlo_lowering.program import Alu, DType, HbmAP, Memory, TileAP

# lhs^T tiles of at most this many rows are loaded with a transposing DMA; its cost grows with
# the element count (one element per contiguous run), a TensorE transpose's does not.
DMA_TRANSPOSE_MAX_ROWS = 8
# PSUM: one bank per n-block of the panel accumulates (the next m-tile reuses a bank long after
# its eviction: it was evicted while the following n-blocks accumulated); at least 2 take
# transposes.
TRANSPOSE_BANKS = 2
MAX_PANEL_BLOCKS = 6
STEPS_PER_PERIOD = 2
# Queues: lhs loads alternate on queues 0 and 1; stores take 2 + parity · blocks + block.
LOAD_QUEUES = 2
# The rhs panel's K tiles go round robin over the last PANEL_QUEUES queues: in K order, yet
# several in flight (one queue alone left TensorE waiting on it in weight-gradient matmuls).
PANEL_QUEUES = 4
# The fewest middle K tiles (neither start nor stop) of an accumulation, or transposes into one
# PSUM bank, that become a loop.
MIN_K_LOOP = 3


def _moves(steps):
  """The HBM offset steps of a step's DMAs in order (0 for every DMA outside a loop)."""
  return iter(steps) if steps is not None else itertools.repeat(0)


@dataclasses.dataclass(frozen=True)
class Span:
  """A contiguous range [start, start + count) of one dimension."""
  start: int
  count: int


def spans(total: int, size: int) -> list[Span]:
  return [Span(s, min(size, total - s)) for s in range(0, total, size)]


class MatmulTiling:
  """A batch matmul [B,M,K] x [B,K,N]'s tiles: K on partitions, output rows (stationary columns)
  in m-tiles, output columns in n-blocks of one fp32 PSUM bank at most."""

  def __init__(self, ctx: LoweringContext, lhs: Place, rhs: Place, out: Place):
    self.ctx, self.lhs, self.rhs, self.out = ctx, lhs, rhs, out
    self.batch, self.m, self.k = lhs.shape
    self.n = rhs.shape[2]
    self.partitions = ctx.partitions
    self.m_tile = min(self.partitions, int(ctx.target_spec["matmul_stationary_free_max"]), self.m)
    self.n_block = min(int(ctx.target_spec["matmul_moving_free_max"]),
                       ctx.psum.bank_bytes // DType.F32.itemsize, self.n)
    self.k_tiles = spans(self.k, self.partitions)
    self.m_tiles = spans(self.m, self.m_tile)


class ResidentRhsMatmul(MatmulTiling):
  """The lowering of one batch matmul whose full-K rhs panel of at least one n-block fits in
  SBUF beside the streaming buffers (`plan` returns None otherwise)."""

  @classmethod
  def plan(cls, ctx: LoweringContext, lhs: Place, rhs: Place, out: Place, companion=None):
    schedule = cls(ctx, lhs, rhs, out, companion)
    return schedule if schedule.panel_blocks else None

  def __init__(self, ctx: LoweringContext, lhs: Place, rhs: Place, out: Place, companion=None):
    """`companion`: a lowering/matmul_pair.TransposedProduct multiplying each staged m-tile of
    the lhs too (its SBUF and PSUM are set aside here)."""
    super().__init__(ctx, lhs, rhs, out)
    self.companion = companion
    self._arena = ctx.sbuf.arena_bytes - (companion.sbuf_bytes if companion else 0)
    self._psum_banks = ctx.psum.count - (companion.psum_banks if companion else 0)
    sb, sm, sk = lhs.strides
    self.lhs_direct = self.m_tile <= DMA_TRANSPOSE_MAX_ROWS or (sm == 1 and sk != 1)
    # fp8 lhs rows are transposed two elements at a time, as bf16 pairs (half the TensorE
    # transposes): K tile 2q + j then holds k = 2·partitions·q + 2p + j on partition p.
    self.pair_tiles = (spans(self.k // 2, self.partitions)
                       if (lhs.dtype.itemsize == 1 and not self.lhs_direct
                           and self.k % (2 * self.partitions) == 0
                           and not self._rhs_transposed()) else None)
    self.queues = int(ctx.target_spec["dma_queues"])
    self.panel_blocks = self._fit_panel()
    self.batch_loop = self.panel_blocks > 0 and self._batch_loop_pays()

  def estimate_ns(self) -> float:
    """The longer of its TensorE time (matmuls and transposes) and its DMA time (operands
    loaded, the lhs once per N panel, and the result stored), without start-up or overlap:
    what choosing between two core splits compares."""
    spec = self.ctx.target_spec
    panels = math.ceil(self.n / (self.panel_blocks * self.n_block))
    lhs_size, rhs_size = self.lhs.dtype.itemsize, self.rhs.dtype.itemsize
    rate = (1 / float(spec["matmul_fp32_slowdown"]) if DType.F32 in (self.lhs.dtype,
                                                                      self.rhs.dtype)
            else float(spec["matmul_fp8_speedup"]) if lhs_size == rhs_size == 1 else 1.0)
    cycles = self.batch * len(self.m_tiles) * len(self.k_tiles) * max(self.n, 64) / rate
    # A transpose of a 128 x 128 tile costs 128 cycles: a cycle per row of 128 elements (fp8
    # rows go as bf16 pairs, half as many).
    if not self.lhs_direct:
      cycles += (self.batch * self.m * self.k * panels / self.partitions
                 / (2 if self.pair_tiles else 1))
    if self._rhs_transposed():
      cycles += self.batch * self.n * self.k / self.partitions
    loaded = (self.batch * self.m * self.k * lhs_size * panels
              + self.batch * self.k * self.n * rhs_size
              + self.batch * self.m * self.n * self.out.dtype.itemsize)
    dma_rate = float(spec["dma_engines_per_core"]) * float(spec["dma_bytes_per_ns_per_engine"])
    return max(cycles / float(spec["tensor_clock_ghz"]), loaded / dma_rate)

  # --- buffers ------------------------------------------------------------------------------

  def _sizes(self, blocks: int) -> list[int]:
    """Bytes per partition of: rhs panel, 2 lhs^T buffers, 2 staging buffers, output tiles."""
    ls, rs, os_ = self.lhs.dtype.itemsize, self.rhs.dtype.itemsize, self.out.dtype.itemsize
    kt = len(self.k_tiles)
    stage = 0 if self.lhs_direct and not self._rhs_transposed() else self.k * max(ls, rs)
    return [kt * blocks * self.n_block * rs, kt * self.m_tile * ls, stage,
            self.n_block * os_]

  def _fit_panel(self) -> int:
    """The most n-blocks (≤ MAX_PANEL_BLOCKS, ≤ the PSUM banks left by transposes) whose
    panel fits in SBUF with the streaming buffers; 0 if not even one does."""
    n_blocks = math.ceil(self.n / self.n_block)
    most = min(MAX_PANEL_BLOCKS, self._psum_banks - TRANSPOSE_BANKS, n_blocks)
    # Equal panels: the fewest panels of at most `most` blocks.
    for blocks in range(math.ceil(n_blocks / math.ceil(n_blocks / most)), 0, -1):
      panel, lhs_t, stage, output = self._sizes(blocks)
      if panel + 2 * lhs_t + 2 * stage + 2 * blocks * output <= self._arena:
        return blocks
    return 0

  def _batch_loop_pays(self) -> bool:
    """Whether to loop over pairs of batches (each a whole batch: its panels, every m-tile)
    rather than over m-tiles inside each batch: when a panel fits twice (the next batch's
    loads while this one multiplies) and the body of two batches (four with the
    peeled copy; each batch's m-tiles, or their nested loop) is smaller than every batch's own
    m-tile loop (about 8 steps a batch)."""
    tiles = len(self.m_tiles)
    # Per batch of the body: its m-tiles, or (their loop nested in it) about 8 steps.
    body = min(tiles, 8) if self._m_tile_loops_fit() else tiles
    if (self.batch // STEPS_PER_PERIOD < MIN_PERIODS
        or 4 * body + self.batch % 2 * tiles >= self.batch * min(tiles, 8)):
      return False
    return self._panel_fits_twice()

  def _panel_fits_twice(self) -> bool:
    panel, lhs_t, stage, output = self._sizes(self.panel_blocks)
    return (2 * panel + 2 * lhs_t + 2 * stage + 2 * self.panel_blocks * output
            <= self._arena)

  def _rhs_transposed(self) -> bool:
    """An rhs stored as [N, K] (K contiguous): loaded row-major and transposed on TensorE."""
    _, sk, sn = self.rhs.strides
    return sk == 1 and sn != 1 and min(self.n_block, self.n) > DMA_TRANSPOSE_MAX_ROWS

  def _carve(self) -> None:
    ctx = self.ctx
    blocks = self.panel_blocks
    panel, lhs_t, stage, output = self._sizes(blocks)
    start = ctx.sbuf.take_arena()
    # Two rhs panels when they fit and more than one is loaded: the next one loads while this
    # one multiplies (segments alternate them).
    segments = self.batch * math.ceil(self.n / (blocks * self.n_block))
    two = self.batch_loop or (segments > 1 and self._panel_fits_twice())
    self.rhs_panels = [start + i * panel for i in range(2 if two else 1)]
    self._segments_before = 0
    self.rhs_panel = self.rhs_panels[0]
    start += len(self.rhs_panels) * panel
    self.lhs_t = [start, start + lhs_t]
    start += 2 * lhs_t
    self.staging = [start, start + stage]
    start += 2 * stage
    self.output_ring = [start + i * output for i in range(2 * blocks)]
    banks = [ctx.psum.take() for _ in range(ctx.psum.count)]
    if self.companion:
      self.companion.carve(start + 2 * blocks * output, banks[self._psum_banks:])
      banks = banks[:self._psum_banks]
    self._banks = banks
    self.accumulators = banks[:max(blocks, 2)]
    # The other banks take transposes in rotation, as many as keep a loop body's fills (two
    # steps', or two batches') a whole number of rotations, so a fill rarely waits on a copy.
    # In a loop over batches that holds loops over m-tiles, both bodies (two batches, two steps).
    step_fills = 0 if self.lhs_direct else len(self._transpose_groups(*self._lhs_transpose_units()))
    bodies = [step_fills]
    if self.batch_loop:
      panels = len(spans(self.n, blocks * self.n_block))
      bodies = [panels * step_fills * len(self.m_tiles) + (
          math.ceil(self.n / self.partitions) * len(self._transpose_groups(self.rhs.dtype,
                                                                          self.k_tiles))
          if self._rhs_transposed() else 0)]
      if self._m_tile_loops_fit():
        bodies.append(step_fills)
    left = len(banks) - len(self.accumulators)
    rotation = max(r for r in range(1, left + 1) if all(2 * fills % r == 0 for fills in bodies))
    self.transposes = banks[len(self.accumulators):len(self.accumulators) + rotation]
    self._blocks = blocks
    self._transpose_fill = 0
    self._periodic = False  # whether the step being emitted is one of a loop's periods
    # Steps of the earlier batches and panels: consecutive steps, across them too, alternate
    # buffers, so a batch's first m-tile does not wait on the previous batch's last.
    self._steps_before = 0
    self._panel_follows = False  # whether another batch or N panel comes after this one
    # In a loop over pairs of batches: per operand, the elements its HBM offsets move per
    # iteration (two batches).
    self._batch_move = None
    self._in_m_loop = False  # whether the step being emitted is in a loop over m-tiles

  def _sbuf(self, dtype: DType, partitions: int, offset, free) -> TileAP:
    return TileAP(Memory.SBUF, dtype, 0, partitions, offset, tuple(free))

  # --- the rhs panel ------------------------------------------------------------------------

  def _load_panel(self, b: int, cols: Span) -> None:
    """rhs[b, :, cols] as one [K_t, panel] tile per K tile."""
    rhs, size = self.rhs, self.rhs.dtype.itemsize
    sb, sk, sn = rhs.strides
    pitch = self.panel_blocks * self.n_block
    if self._rhs_transposed():
      for i, rows in enumerate(spans(cols.count, self.partitions)):
        stage = self.staging[i % 2]
        self._dma(self.queues - 1, self._sbuf(rhs.dtype, rows.count, stage, ((1, self.k),)),
                  HbmAP(rhs.tensor, rhs.offset + b * sb + (cols.start + rows.start) * sn,
                        ((sn, rows.count), (sk, self.k))), "src", 0, "rhs")
        self._transpose(rows.count, stage, self.rhs_panel + rows.start * size, pitch, rhs.dtype,
                        self.k_tiles)
      return
    # PANEL_QUEUES queues in K order: the first m-tile's early K tiles arrive first, and a
    # panel of short runs (a weight gradient's) is not held to one queue's rate; one row needs
    # no order, and the round robin spreads the panels of small matmuls.
    # Column group by column group when the first two m-tiles multiply the panel in groups
    # (_multiply_pair): a group's K tiles arrive together, so its matmuls start on them.
    for group in self._pair_groups(spans(cols.count, self.n_block)):
      first_block, last_block = group[0], group[-1]
      part = Span(cols.start + first_block.start,
                  last_block.start + last_block.count - first_block.start)

      def load(i: int, k_steps=None, part=part) -> None:
        kt = self.k_tiles[i]
        first, apart = self._k_rows(i)
        self._dma(self.queues - 1 - i % PANEL_QUEUES,
                  self._sbuf(rhs.dtype, kt.count,
                             self.rhs_panel + (i * pitch + part.start - cols.start) * size,
                             ((1, part.count),)),
                  HbmAP(rhs.tensor, rhs.offset + b * sb + first * sk + part.start * sn,
                        ((apart * sk, kt.count), (sn, part.count))), "src", 0, "rhs",
                  fixed=len(self.k_tiles) > 1, k_steps=k_steps)

      self._k_tile_loop(range(len(self.k_tiles)), PANEL_QUEUES, load, {
          "src": PANEL_QUEUES * self.partitions * sk,
          ("dst", "byte_offset"): PANEL_QUEUES * pitch * size})

  def _k_rows(self, i: int) -> tuple[int, int]:
    """(first k, k apart) of the K elements on the partitions of K tile i."""
    if self.pair_tiles is None:
      return self.k_tiles[i].start, 1
    q, j = divmod(i, 2)
    return 2 * self.partitions * q + j, 2

  def _lhs_transpose_units(self) -> tuple[DType, list[Span]]:
    """The dtype and K tiles a staged lhs tile is transposed in."""
    if self.pair_tiles is None:
      return self.lhs.dtype, self.k_tiles
    return DType.BF16, self.pair_tiles

  def _transpose_lhs(self, t: int) -> None:
    """m-tile t's staged rows into its lhs^T buffer (per K tile [K_t, rows], m_tile apart)."""
    dtype, tiles = self._lhs_transpose_units()
    self._transpose(self.m_tiles[t].count, self.staging[self._parity(t)],
                    self.lhs_t[self._parity(t)], self.m_tile, dtype, tiles)
    if self.companion:
      self.companion.multiply(t, len(self.m_tiles), self.m_tiles[t].count,
                              self.staging[self._parity(t)], self._parity(t))

  def _transpose_groups(self, dtype: DType, tiles: list[Span]) -> list[tuple[int, int]]:
    """(first K tile, count) of the runs of equal-height K tiles that share one PSUM bank."""
    per_bank = self.ctx.psum.bank_bytes // (self.partitions * dtype.itemsize)
    groups, i = [], 0
    while i < len(tiles):
      group = 1
      while (group < per_bank and i + group < len(tiles)
             and tiles[i + group].count == tiles[i].count):
        group += 1
      groups.append((i, group))
      i += group
    return groups

  def _transpose(self, rows: int, stage, dst, pitch: int, dtype: DType,
                 tiles: list[Span]) -> None:
    """Transposes a staged [rows, K] tile (`tiles`: its K tiles) into per-K-tile [K_t, rows]
    tiles `pitch` elements apart from `dst`: tiles of equal height share a PSUM bank and one
    copy out of it."""
    b, debug, size = self.ctx.builder, self.ctx.debug_id, dtype.itemsize
    for i, group in self._transpose_groups(dtype, tiles):
      height = tiles[i].count
      fill = self._transpose_fill
      bank = self.transposes[fill % len(self.transposes)]
      self._transpose_fill += 1
      # The group's transposes differ only by their offsets: one loop stepping them (format
      # version 7's tile steps) where there are enough.
      looped = loops_enabled() and group >= MIN_K_LOOP
      apart = self.partitions * size
      for j in range(1 if looped else group):
        src = self._sbuf(dtype, rows, stage + (i + j) * apart, ((1, tiles[i + j].count),))
        into = TileAP(Memory.PSUM, dtype, 0, height, bank + j * apart, ((1, rows),))
        if looped:
          with b.loop(group):
            b.transpose(into, src, debug=debug, steps={("dst", "byte_offset"): apart,
                                                       ("src", "byte_offset"): apart})
        else:
          b.transpose(into, src, debug=debug)
      copy = (self._sbuf(dtype, height, dst + i * pitch * size, ((pitch, group), (1, rows))),
              TileAP(Memory.PSUM, dtype, 0, height, bank, ((self.partitions, group), (1, rows))))
      # Every other bank is copied out by ScalarE, as evictions are (_evict): the copies were
      # most of the VectorE work of matmuls that transpose, VectorE is what attention and the
      # transformer block wait on, and ScalarE is mostly idle there. Its copy goes through
      # fp32 (exact for every operand dtype), but it would quiet a NaN bit pattern, so the
      # fp8 bytes packed in bf16 pairs stay on VectorE's bit copy. A loop body holds an even
      # number of fills (two steps or two batches), so its iterations alternate alike.
      if fill % 2 and tiles is not self.pair_tiles:
        b.activation(Alu.COPY, *copy, debug=debug)
      else:
        b.tensor_copy(*copy, debug=debug)

  # --- the steps ----------------------------------------------------------------------------

  def _k_tile_loop(self, tiles: range, group: int, emit, k_steps: dict,
                   loop: bool = True) -> None:
    """`emit(i)` for the K tiles `tiles` in order; where `loop`, their full K tiles in groups of
    `group` (the period of the queues they wait on or use) as one loop of at least MIN_K_LOOP
    iterations, its body `emit(i, k_steps)` for a group (`k_steps`: per iteration, a group's
    move), the rest plain. A loop runs the very instructions of its unrolled tiles, in order."""
    full = sum(self.k_tiles[i].count == self.partitions for i in tiles)
    groups = full // group if loop and loops_enabled() else 0
    looped = group * groups if groups >= MIN_K_LOOP else 0
    if looped:
      with self.ctx.builder.loop(groups):
        for i in tiles[:group]:
          emit(i, k_steps)
    for i in tiles[looped:]:
      emit(i)

  def _lhs_sources(self, b: int, s: int) -> list[int]:
    """HBM offsets of m-tile s's lhs loads: one staged [rows, K] load, or one lhs^T load per K
    tile (direct)."""
    sb, sm, sk = self.lhs.strides
    corner = self.lhs.offset + b * sb + self.m_tiles[s].start * sm
    if self.lhs_direct:
      return [corner + kt.start * sk for kt in self.k_tiles]
    return [corner] + (self.companion.sources(b, self.m_tiles[s]) if self.companion else [])

  def _stage_lhs(self, s: int, offsets: list[int], steps) -> None:
    lhs, rows = self.lhs, self.m_tiles[s].count
    sb, sm, sk = lhs.strides
    size = lhs.dtype.itemsize
    queue = self._parity(s)
    if self.lhs_direct:
      # Each K tile's load's step in the m-tile loop (`_step_key`'s order; all alike).
      moves = [next(steps) for _ in self.k_tiles]

      def load(i: int, k_steps=None) -> None:
        kt = self.k_tiles[i]
        dst = self._sbuf(lhs.dtype, kt.count,
                         self.lhs_t[self._parity(s)] + i * self.m_tile * size, ((1, rows),))
        self._dma(queue, dst, HbmAP(lhs.tensor, offsets[i], ((sk, kt.count), (sm, rows))),
                  "src", moves[i], "lhs", k_steps=k_steps)

      # One queue in the periodic steps; on the back end's round robin elsewhere, where a loop
      # whose body takes every queue once gets the unrolled loads' queues.
      group = 1 if self._periodic else self.queues
      self._k_tile_loop(range(len(self.k_tiles)), group, load, {
          "src": group * self.partitions * sk, ("dst", "byte_offset"): group * self.m_tile * size})
      return
    self._dma(queue, self._sbuf(lhs.dtype, rows, self.staging[self._parity(s)], ((1, self.k),)),
              HbmAP(lhs.tensor, offsets[0], ((sm, rows), (sk, self.k))), "src", next(steps),
              "lhs")
    if self.companion:
      self._dma(queue, *self.companion.load(self.m_tiles[s], self._parity(s), offsets[1]), "src",
                next(steps), "pair_rhs", debug=self.companion.debug)

  def _store_targets(self, b: int, s: int, blocks: list[Span]) -> list[int]:
    ob, om, on = self.out.strides
    corner = self.out.offset + b * ob + self.m_tiles[s].start * om
    return [corner + block.start * on for block in blocks]

  def _dma(self, queue: int, dst, src, moving: str, step: int, operand: str,
           fixed: bool = False, k_steps: dict | None = None, debug: int | None = None) -> None:
    """A DMA of `operand` ("lhs", "rhs", "out", or the companion's "pair_rhs" and "pair_out"):
    on `queue` in the periodic steps (a loop's, or their unrolled form) or when `fixed`, on the
    back end's round robin elsewhere (spread over every queue: a short matmul is latency-bound).
    `k_steps`: its steps in a loop over K tiles (`_k_tile_loop`) inside the loops over batches
    and m-tiles. `debug`: its debug entry (default: the op's)."""
    steps = []  # one dict per enclosing loop, outermost first
    if self._batch_move is not None:  # by two batches
      steps.append({moving: self._batch_move[operand]})
    if self._in_m_loop:
      steps.append({moving: step})
    if k_steps is not None:
      steps.append(k_steps)
    debug = self.ctx.debug_id if debug is None else debug
    queue = queue % self.queues if self._periodic or fixed else None
    self.ctx.builder.dma_copy(queue, dst, src, debug=debug, steps=steps or None)

  def _multiply(self, b: int, s: int, blocks: list[Span], targets: list[int], steps) -> None:
    """m-tile s times the panel, one PSUM bank per n-block, each accumulating its K tiles in
    order. A panel's first m-tile goes K tile by K tile over every bank (its matmuls follow
    the panel's rows as they arrive), and so does its last when another panel follows (its rows
    are freed one by one, so the next panel's loads overlap it); the others go bank by bank (a
    bank is evicted while the next accumulates)."""
    builder, debug = self.ctx.builder, self.ctx.debug_id
    rows = self.m_tiles[s].count
    rsize = self.rhs.dtype.itemsize
    pitch = self.panel_blocks * self.n_block
    last = len(self.k_tiles) - 1
    # Two or more n-blocks use their own banks in every step; one alternates two.
    banks = [self.accumulators[j if len(blocks) > 1 else self._parity(s)]
             for j in range(len(blocks))]
    dsts = [TileAP(Memory.PSUM, DType.F32, 0, rows, bank, ((1, block.count),))
            for bank, block in zip(banks, blocks)]

    def product(i: int, j: int, steps=None) -> None:
      kt = self.k_tiles[i]
      stationary = self._stationary(s, i, rows)
      moving = self._sbuf(self.rhs.dtype, kt.count,
                          self.rhs_panel + (i * pitch + j * self.n_block) * rsize,
                          ((1, blocks[j].count),))
      builder.matmul(dsts[j], stationary, moving, start=i == 0, stop=i == last, debug=debug,
                     steps=steps)

    follows_rows = s == 0 or (s == len(self.m_tiles) - 1 and self._panel_follows)
    # The middle K tiles (neither start nor stop) differ only by their SBUF offsets: one loop
    # per bank stepping them (format version 7's tile steps). Where the matmuls follow the
    # panel's rows, their waits on the round robin of panel queues are affine only per group of
    # PANEL_QUEUES K tiles: a loop over such groups, every bank in each.
    middle = range(1, last)
    k_loop = (loops_enabled() and self.pair_tiles is None and len(middle) >= MIN_K_LOOP
              and not follows_rows)
    k_steps = {("stationary", "byte_offset"): self.m_tile * self.lhs.dtype.itemsize,
               ("moving", "byte_offset"): pitch * rsize}

    def products(tiles, js) -> None:
      if k_loop and tiles is middle:
        with builder.loop(len(middle)):
          for j in js:
            product(middle[0], j, k_steps)
        return
      for i in tiles:
        for j in js:
          product(i, j)

    def every_block(i: int, steps=None) -> None:
      for j in range(len(blocks)):
        product(i, j, steps)

    runs = [range(0, 1), middle] if last else []
    if follows_rows and last:
      products(range(0, 1), range(len(blocks)))
      # A group of _wait_period K tiles waits one further on each queue than the group before,
      # so groups loop.
      period = self._wait_period(len(middle))
      self._k_tile_loop(middle, period, every_block, {
          key: period * step for key, step in k_steps.items()},
          loop=self.pair_tiles is None and not self._rhs_transposed())
    for j in range(len(blocks)):
      for tiles in ([] if follows_rows else runs) + [range(last, last + 1)]:
        products(tiles, [j])
      self._evict(s, j, blocks[j], dsts[j], targets[j], next(steps))

  def _pair_applies(self) -> bool:
    """Whether each panel's first two m-tiles multiply it together (_pair_step): a panel of
    one batch's m-tiles (not the loop over pairs of batches) with two of them at least, loaded
    by DMA (a transposed rhs keeps TensorE busy on its own transposes while it arrives)."""
    return len(self.m_tiles) >= 2 and not self.batch_loop and not self._rhs_transposed()

  def _pair_groups(self, blocks: list[Span]) -> list[list[Span]]:
    """The panel's n-blocks in the groups the first two m-tiles multiply together: two
    accumulations per n-block of a group at once, in at most the banks transposes leave."""
    if not self._pair_applies():
      return [blocks]
    widest = (self.ctx.psum.count - TRANSPOSE_BANKS) // 2
    count = math.ceil(len(blocks) / widest)
    width = math.ceil(len(blocks) / count)
    return [blocks[g:g + width] for g in range(0, len(blocks), width)]

  def _pair_step(self, b: int, blocks: list[Span]) -> None:
    """Steps 0 and 1 together: while the panel streams in, TensorE has both m-tiles' matmuls
    for each K tile that arrived (one m-tile's alone ran at the rate of the panel's load,
    and left TensorE waiting on it). The loads and transposes are steps 0 and 1's."""
    steps = _moves(None)
    ahead, tiles = self._ahead(), len(self.m_tiles)
    if ahead < tiles:
      self._stage_lhs(ahead, self._lhs_sources(b, ahead), steps)
    if not self.lhs_direct:
      self._transpose_lhs(1)
    self._multiply_pair(b, blocks)
    if 1 + ahead < tiles:
      self._stage_lhs(1 + ahead, self._lhs_sources(b, 1 + ahead), steps)
    if not self.lhs_direct and 2 < tiles:
      self._transpose_lhs(2)

  def _multiply_pair(self, b: int, blocks: list[Span]) -> None:
    """m-tiles 0 and 1 times the panel, group by group of n-blocks (_pair_groups): K tile by
    K tile, both m-tiles and every n-block of the group (each its own bank accumulating its K
    tiles in order), then the group's evictions. Groups alternate two sets of banks where
    PSUM has them, so a group's first matmuls do not wait on the last group's evictions."""
    builder, debug = self.ctx.builder, self.ctx.debug_id
    rsize = self.rhs.dtype.itemsize
    pitch = self.panel_blocks * self.n_block
    last = len(self.k_tiles) - 1
    groups = self._pair_groups(blocks)
    width = max(len(group) for group in groups)
    sets = 2 if 4 * width <= len(self._banks) else 1
    targets = [self._store_targets(b, t, blocks) for t in (0, 1)]
    first = 0  # the panel's index of the group's first n-block
    for g, group in enumerate(groups):
      base = g % sets * 2 * width
      dsts = {(t, q): TileAP(Memory.PSUM, DType.F32, 0, self.m_tiles[t].count,
                             self._banks[base + t * width + q], ((1, block.count),))
              for t in (0, 1) for q, block in enumerate(group)}

      def k_tile(i: int, steps=None, dsts=dsts, first=first, group=group) -> None:
        kt = self.k_tiles[i]
        for t in (0, 1):
          stationary = self._stationary(t, i, self.m_tiles[t].count)
          for q, block in enumerate(group):
            moving = self._sbuf(self.rhs.dtype, kt.count,
                                self.rhs_panel + (i * pitch + (first + q) * self.n_block) * rsize,
                                ((1, block.count),))
            builder.matmul(dsts[t, q], stationary, moving, start=i == 0, stop=i == last,
                           debug=debug, steps=steps)

      # The middle K tiles as a loop over groups of K tiles whose waits repeat (_wait_period),
      # as in _multiply's first m-tile.
      period = self._wait_period(last - 1)
      k_tile(0)
      self._k_tile_loop(range(1, last), period, k_tile, {
          ("stationary", "byte_offset"): period * self.m_tile * self.lhs.dtype.itemsize,
          ("moving", "byte_offset"): period * pitch * rsize},
          loop=self.pair_tiles is None)
      if last:
        k_tile(last)
      for t in (0, 1):
        for q, block in enumerate(group):
          self._evict(t, first + q, block, dsts[t, q], targets[t][first + q], 0)
      first += len(group)

  def _wait_period(self, tiles: int) -> int:
    """How many of `tiles` K tiles a loop over the matmuls that follow the panel's rows takes
    per iteration: K tile i's panel rows come on the (i mod PANEL_QUEUES)-th panel queue, so
    the waits of a group of PANEL_QUEUES repeat one further on each queue; outside the periodic
    steps a direct lhs's K tiles come by the back end's round robin, K tile i on the
    (i mod queues)-th queue after the first's, and the waits repeat only after both periods
    (when that still leaves MIN_K_LOOP iterations; fewer K tiles keep PANEL_QUEUES, whose loop
    the back end keeps where the lhs waits fall away)."""
    both = math.lcm(PANEL_QUEUES, self.queues)
    if self.lhs_direct and not self._periodic and tiles // both >= MIN_K_LOOP:
      return both
    return PANEL_QUEUES

  def _stationary(self, s: int, i: int, rows: int) -> TileAP:
    """K tile i of m-tile s's lhs^T: [K_t, rows] (pairs: every other element of a bf16 pair
    transpose's [K_t, rows · 2])."""
    base = self.lhs_t[self._parity(s)]
    if self.pair_tiles is None:
      return self._sbuf(self.lhs.dtype, self.k_tiles[i].count,
                        base + i * self.m_tile * self.lhs.dtype.itemsize, ((1, rows),))
    q, j = divmod(i, 2)
    return self._sbuf(self.lhs.dtype, self.partitions, base + q * 2 * self.m_tile + j,
                      ((2, rows),))

  def _evict(self, s: int, j: int, block: Span, bank: TileAP, target: int, step: int) -> None:
    """VectorE or ScalarE copies n-block j's bank into an output tile (the output dtype); a DMA
    stores it. The two engines take turns by n-block and step parity (so loop bodies repeat):
    ScalarE's `activation` copy computes in fp32 (PSUM's dtype, times 1, a zero bias adds
    nothing) and converts like VectorE's, so the result is the same. Evictions are most of the
    VectorE work of attention's q·kᵀ, and ScalarE is mostly idle in matmul code."""
    rows = self.m_tiles[s].count
    _, om, on = self.out.strides
    tile = self._sbuf(self.out.dtype, rows, self.output_ring[self._parity(s) * self._blocks + j],
                      ((1, block.count),))
    if (self._parity(s) + j) % 2:
      self.ctx.builder.activation(Alu.COPY, tile, bank, debug=self.ctx.debug_id)
    else:
      self.ctx.builder.tensor_copy(tile, bank, debug=self.ctx.debug_id)
    self._dma(LOAD_QUEUES + self._parity(s) * self._blocks + j,
              HbmAP(self.out.tensor, target, ((om, rows), (on, block.count))), tile, "dst", step,
              "out")

  def _step(self, b: int, s: int, blocks: list[Span], steps=None) -> None:
    """m-tile s+2's load, m-tile s+1's transposes, m-tile s's matmuls and stores."""
    steps = _moves(steps)
    ahead = self._ahead()
    if s + ahead < len(self.m_tiles):
      self._stage_lhs(s + ahead, self._lhs_sources(b, s + ahead), steps)
    if not self.lhs_direct and s + 1 < len(self.m_tiles):
      self._transpose_lhs(s + 1)
    self._multiply(b, s, blocks, self._store_targets(b, s, blocks), steps)

  def _parity(self, s: int) -> int:
    """Which of two buffers (banks, queues) m-tile s of this panel uses."""
    return (self._steps_before + s) % 2

  def _ahead(self) -> int:
    """How many m-tiles ahead of its matmuls a tile is loaded: staged rows are transposed a
    step before their matmuls and loaded a step before that."""
    return 1 if self.lhs_direct else 2

  def _step_key(self, b: int, s: int, blocks: list[Span]):
    """(what must repeat, HBM offsets that may move) of step s, in `_step`'s DMA order."""
    ahead = self._ahead()
    loads = self._lhs_sources(b, s + ahead) if s + ahead < len(self.m_tiles) else []
    shape = tuple(self.m_tiles[t].count if t < len(self.m_tiles) else 0
                  for t in range(s, s + ahead + 1))
    return shape, tuple(loads + self._store_targets(b, s, blocks))

  # --- emission -----------------------------------------------------------------------------

  def emit(self) -> None:
    self._carve()
    if not self.batch_loop:
      for b in range(self.batch):
        self._emit_batch(b, loop_m_tiles=True, periodic=False)
      return
    # A loop over pairs of batches: every DMA on its own queue, offsets moving by two batches;
    # each batch's m-tiles a loop nested in it where their transposes keep the bank rotation.
    pairs = self.batch // STEPS_PER_PERIOD
    first = 0
    if loops_enabled():
      operands = [("lhs", self.lhs), ("rhs", self.rhs), ("out", self.out)]
      if self.companion:
        operands += [("pair_rhs", self.companion.b2), ("pair_out", self.companion.out)]
      self._batch_move = {name: STEPS_PER_PERIOD * place.strides[0] for name, place in operands}
      with self.ctx.builder.loop(pairs):
        for b in range(STEPS_PER_PERIOD):
          self._emit_batch(b, loop_m_tiles=self._m_tile_loop_repeats(), periodic=True)
      self._batch_move = None
      first = STEPS_PER_PERIOD * pairs
    for b in range(first, self.batch):
      self._emit_batch(b, loop_m_tiles=False, periodic=b < STEPS_PER_PERIOD * pairs)
    self._periodic = False

  def _m_tile_loops_fit(self) -> bool:
    """Whether a batch has the m-tiles for a loop over them (MIN_PERIODS periods of steps
    between the first step and those loading past the last m-tile)."""
    return (len(self.m_tiles) - 1 - self._ahead()) // STEPS_PER_PERIOD >= MIN_PERIODS

  def _m_tile_loop_repeats(self) -> bool:
    """Whether two m-tile steps take a whole number of turns of the transposes' PSUM banks
    (so a loop over them, in the loop over batches, uses the unrolled steps' banks)."""
    if self.lhs_direct:
      return True
    fills = len(self._transpose_groups(*self._lhs_transpose_units()))
    return STEPS_PER_PERIOD * fills % len(self.transposes) == 0

  def _emit_batch(self, b: int, loop_m_tiles: bool, periodic: bool) -> None:
    """Batch b: per N panel, its load and its m-tiles' steps (as a loop over m-tiles when
    `loop_m_tiles`, else plain). `periodic`: every DMA on its own queue (a loop over batches
    holds them, or their unrolled form); else only those of the m-tile loop's periods."""
    pitch = self.panel_blocks * self.n_block
    panels = spans(self.n, pitch)
    for p, cols in enumerate(panels):
      self.rhs_panel = self.rhs_panels[self._segments_before % len(self.rhs_panels)]
      self._segments_before += 1
      self._panel_follows = periodic or b + 1 < self.batch or p + 1 < len(panels)
      self._periodic = periodic
      self._load_panel(b, cols)
      blocks = spans(cols.count, self.n_block)
      blocks = [Span(cols.start + blk.start, blk.count) for blk in blocks]
      self._blocks = len(blocks)
      self._prologue(b)
      # The first steps' matmul order is their own (_pair_step, or _multiply's first m-tile).
      if self._pair_applies():
        self._pair_step(b, blocks)
        start = 2
      else:
        self._step(b, 0, blocks)
        start = 1
      # Steps start … repeat with period 2: the loop's body is steps start and start + 1.
      keys = [self._step_key(b, s, blocks) for s in range(start, len(self.m_tiles))]
      periods = periodic_prefix(keys, STEPS_PER_PERIOD) if loop_m_tiles else 0
      repeated = periods * STEPS_PER_PERIOD if periods >= MIN_PERIODS else 0
      first = start
      if repeated and loops_enabled():
        self._periodic, self._in_m_loop = True, True
        with self.ctx.builder.loop(periods):
          for s, steps in enumerate(offset_steps(keys, STEPS_PER_PERIOD), start=start):
            self._step(b, s, blocks, steps)
        self._in_m_loop = False
        first += repeated
      for s in range(first, len(self.m_tiles)):
        self._periodic = periodic or s < start + repeated
        self._step(b, s, blocks)
      self._periodic = False
      self._steps_before += len(self.m_tiles)
    if self.companion:
      self._periodic = periodic
      self._dma(LOAD_QUEUES + 2 * self._blocks, *self.companion.finish(b), "dst", 0, "pair_out",
                debug=self.companion.debug)
      self._periodic = False

  def _prologue(self, b: int) -> None:
    """The loads (and transposes) the first step expects done."""
    steps = _moves(None)
    for t in range(min(self._ahead(), len(self.m_tiles))):
      self._stage_lhs(t, self._lhs_sources(b, t), steps)
    if not self.lhs_direct:
      self._transpose_lhs(0)
