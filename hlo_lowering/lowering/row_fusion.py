"""trn.row_fusion (passes/fuse_rows.py): row reductions and the elementwise ops around them over
blocks of whole rows resident in SBUF.

Per block of p ≤ 128 rows (rows on partitions, each row whole on the free axis):
- each row operand from outside is loaded once as a [p, C] tile (C: the row's elements); one
  whose rows are all the same (a layernorm's scale, broadcast with stride 0) is loaded once
  before the blocks instead; statistics from outside are loaded as [p, 1] tiles;
- the members run in program order (nested trn.fusion clusters inline): elementwise ops over
  rows on [p, C] tiles with elementwise.py's per-op compute, each in its own result dtype as it
  runs alone; a reduce is one VectorE `tensor_reduce` of the row tile into an fp32 [p, 1]
  partial (integers: their own dtype), combined with the init value and rounded to the result
  dtype exactly as reduce.py's rows layout does, so results are bit-identical to the unfused
  program; ops over statistics run on [p, 1] tiles; a statistic broadcast over the rows is not
  materialized: a binary op reads it as the per-partition scalar of `tensor_scalar`
  (reverse when it is the first operand), select and clamp as a stride-0 tile view;
- only the values used outside are stored.
Three rewrites keep the bits and save VectorE passes: an op computed twice on the same values
runs once; an fp32 `row ± statistic` read only by a ScalarE function is that activation's
per-partition bias (ScalarE sums x · ±1 + bias in fp32 as VectorE would); a float → fp32
convert read only by reduces and fp32 float arithmetic is its readers' own exact widening.
Iota-derived members (attention's causal mask) are computed on GpSimd from each block's
coordinates (row_affine.py): an `affine_select` per masked select, nothing for the indices.
An fp32 statistic or row read only by its convert to bf16/fp16 is written narrow by the op that
makes it (fp32 arithmetic rounded once, as the convert rounds).
An fp32 (row op statistic-or-immediate) read only by a row-by-row op fuses into it: VectorE's
scalar_tensor_tensor keeps the intermediate in fp32 (layernorm's ((x - mean) · rstd) · g in one
tensor_tensor's time).
Passes with a bit-identical ScalarE form (row · s, row ± s, row · row, the add-reduce of a row
ScalarE writes, summed in the same ScalarE pass, any other float add-reduce, as ScalarE's
exact copy of the row to an fp32 scratch row (or over the fp32 row it reads last) with its
row sum, and for computed fp32 rows the rounding convert, copy(x · 1)) run on ScalarE or
VectorE, as row_engines.py places them to keep the busier engine's block time lowest, so the
two engines share a block's work. ScalarE's row - s adds (-0) - s, made once per block: -s to
the bit for numbers and zeros, and a NaN s keeps its sign as VectorE's subtract returns it.
Under TRN_ROW_DIVIDE_BY_RECIPROCAL=1 (an explicit opt-in: not bit-identical to XLA's divide, see
docs/numerics.md) a row divided by a statistic (softmax's normalisation) is a multiply by the
statistic's reciprocal, made once per block, on either engine: what NKI kernels do, an eighth of
VectorE's divide time.
Blocks take banks of tiles in turn, as many banks as the block's stages (where its ops change
engine; up to MAX_BANKS) when they fit, and are emitted software-pipelined
(row_engines.run_pipelined: block b + 1's loads and first passes overlap block b's later ones);
regular runs of blocks are a counted loop
(tile_loops.py) whose body pipelines its own blocks, so the program does not grow with the rows.

A matmul member's row that a scalar_tensor_tensor reads, and only VectorE and ScalarE read,
stays in the PSUM banks it was summed in, rounded there in place (`_rows_left_in_psum`): VectorE
reads one input from PSUM at N cycles, not 2N. Block b + sets reuses block b's PSUM banks, so the
pipeline's stages merge until the row's last read comes at most `sets` stages after its matmul.
A block's row tiles lie one after another in its bank (RowLayout); where the bank then holds
fewer blocks in flight than the pipeline wants, a tile instead takes the place of a row whose
last reader ran, so a long chain (the softmax vjp and the mask of its gradient) keeps its
blocks in flight. The tiles of read rows leave the block's map, so a read after the span the
layout gave fails the compile rather than reading another row's bytes.

Rows must fit: fuse-rows only forms a group when `rows_fit` (≤ one SBUF slot per row and the
row values a block holds at once within ROW_SLOTS slots); longer rows keep the unfused
lowering.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import math
import os
from typing import NamedTuple

from hlo_lowering.errors import CompileError
from hlo_lowering.ir import Op, Value
from hlo_lowering.lowering.allocators import SBUF_SLOT_BYTES
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.core_split import emit_shares, tile_shares
from hlo_lowering.lowering.elementwise import (SCALAR_ENGINE, alu_of, emit_alu_op,
                                              splat_operand_index, vector_form)
from hlo_lowering.lowering.elementwise_engines import TileOp, zero_bias
from hlo_lowering.lowering.places import Place, collapse_dims
from hlo_lowering.lowering.reduce import REDUCERS, finish_partial
from hlo_lowering.lowering import attention_rows, row_affine
from hlo_lowering.lowering.registry import find_rule, register_lowering
from hlo_lowering.lowering.row_engines import (EITHER, SCALAR, VECTOR, RowStep,
                                               choose_scalar_steps, has_scalar_form,
                                               ONE, ZERO, activate, pipeline_stages, run_pipelined,
                                               scalar_pass, vector_cycles)
from hlo_lowering.lowering.tile_loops import (MIN_PERIODS, loops_enabled, offset_steps,
                                              periodic_prefix, periods_holding, tile_period)
from hlo_lowering.program import Alu, DType, HbmAP, Memory, Scalar, TileAP

ROW_FUSION = "trn.row_fusion"
FUSION = "trn.fusion"
# Row tiles of one block (both banks fit when they can); one more slot holds [p, 1] cells. Every
# target has at least ROW_SLOTS + 1 slots.
ROW_SLOTS = 10
CELL_BYTES = 8
# Stages (blocks in flight) at most, and the blocks a pipelined loop iteration holds at least.
MAX_BANKS = 8
PIPELINED_BLOCKS = 8
_VIEWS = frozenset({"stablehlo.broadcast_in_dim", "stablehlo.reshape"})
GPSIMD = "gpsimd"  # the on-chip affine members' engine (row_affine.py)
TENSOR = "tensor"  # the matmul members' engine (attention_rows.py)
ROW, STAT = "row", "stat"  # a [p, C] tile; a [p, 1] cell (also a statistic broadcast over rows)
# Ops whose fp32 results are computed, never a loaded value's bits passed through.
_ARITHMETIC = frozenset({"stablehlo.add", "stablehlo.subtract", "stablehlo.multiply",
                         "stablehlo.divide", "stablehlo.exponential"})


def divides_by_reciprocal() -> bool:
  """TRN_ROW_DIVIDE_BY_RECIPROCAL=1: row / statistic as row · (1 / statistic)."""
  return os.environ.get("TRN_ROW_DIVIDE_BY_RECIPROCAL", "") not in ("", "0")


class RowSpace(NamedTuple):
  """The rows of a row fusion: row values of `shape`, whose last `reduced` dims are a row."""
  shape: tuple[int, ...]
  reduced: int

  @property
  def kept(self) -> tuple[int, ...]:
    return self.shape[:len(self.shape) - self.reduced]

  @property
  def columns(self) -> int:
    return math.prod(self.shape[len(self.kept):])

  def is_stat(self, shape: tuple[int, ...]) -> bool:
    """A statistic: one element per row (row r = element r in row-major order)."""
    return math.prod(shape) == math.prod(self.kept) and tuple(shape) != self.shape

  def stat_view(self, op: Op) -> bool:
    """A reshape or broadcast_in_dim that keeps a statistic's element order (to a statistic), or
    broadcasts it over each row's elements (to the rows)."""
    source, result = op.operands[0].shape, op.result.shape
    if not self.is_stat(source) or not (self.is_stat(result) or result == self.shape):
      return False
    if op.name == "stablehlo.reshape":
      return self.is_stat(result)
    dims = list(op.attrs["broadcast_dimensions"])
    kept = [d for d, n in zip(dims, source) if n != 1]
    in_order = kept == sorted(kept)
    return in_order and (self.is_stat(result) or all(d < len(self.kept) for d in kept))


def _tile_bytes(columns: int, itemsize: int) -> int:
  return -(-columns * itemsize // 64) * 64


def rows_fit(columns: int, itemsize: int, row_values: int) -> bool:
  """Whether whole rows of `columns` elements fit: one slot per row tile and `row_values` tiles
  per block within ROW_SLOTS slots."""
  tile = _tile_bytes(columns, itemsize)
  return columns * itemsize <= SBUF_SLOT_BYTES and row_values * tile <= ROW_SLOTS * SBUF_SLOT_BYTES


class _View:
  """An HBM place over the rows (row values) or the kept dims (statistics): its kept dims'
  strides and its columns as access-pattern dims."""

  def __init__(self, place: Place, kept_rank: int):
    self.place = place
    self.row_strides = place.strides[:kept_rank]
    columns = place.shape[kept_rank:]
    if any(c != 1 for c in columns):
      shape, (strides,) = collapse_dims(columns, place.strides[kept_rank:])
      self.columns = tuple(zip(strides, shape))
    else:
      self.columns = ((1, 1),)

  def ap(self, offset: int, partition_stride: int, partitions: int) -> HbmAP:
    return HbmAP(self.place.tensor, offset, ((partition_stride, partitions),) + self.columns)


# Layout keys besides row values: ScalarE's fp32 scratch row for copy sums; with a member, the
# int32 differences of its affine compare.
SCRATCH, DIFFERENCE = "scratch", "difference"


class RowLayout:
  """Where a block's row tiles lie in its bank. `spans`: key -> (first step, last step, bytes):
  a tile is its dtype's width, live from the step that writes it (a loaded row: the block's
  start) to its last reader. Without `reuse` the tiles lie one after another in order of their
  first step. With it, a tile may take the place of one whose last reader ran: each goes to
  the lowest offset clear of the tiles placed before it that are live at the same time, placed
  in order of their first step, or the widest first, or all as slots of the widest, whichever
  makes the bank (`nbytes`) smallest. (Reuse costs waits: the new row's writer waits for the
  old row's last reader.)"""

  def __init__(self, spans: dict, reuse: bool):
    self.spans = spans
    by_start = sorted(spans, key=lambda k: spans[k][0])
    if not reuse:
      self.offsets, self.nbytes = self._place({k: (0, 0, n) for k, (_, _, n) in spans.items()},
                                              by_start, None)
      return
    widest = max((n for _, _, n in spans.values()), default=0)
    by_size = sorted(by_start, key=lambda k: -spans[k][2])
    self.offsets, self.nbytes = min((self._place(spans, by_start, None),
                                     self._place(spans, by_size, None),
                                     self._place(spans, by_start, widest)),
                                    key=lambda placed: placed[1])

  @staticmethod
  def _place(spans: dict, order: list, slot: int | None) -> tuple[dict, int]:
    """(offsets, end) of the spans placed in `order` (all `slot` bytes wide, if given)."""
    size = lambda key: slot or spans[key][2]
    offsets, end = {}, 0
    for key in order:
      first, last, _ = spans[key]
      clashes = sorted((offsets[k], offsets[k] + size(k)) for k in offsets
                       if spans[k][0] <= last and first <= spans[k][1])
      at = 0
      for lo, hi in clashes:
        if at + size(key) <= lo:
          break
        at = max(at, hi)
      offsets[key] = at
      end = max(end, at + size(key))
    return offsets, end


class _RowFusion:
  """One trn.row_fusion: the plan (which value is a row tile, which a cell, what is loaded and
  stored), the SBUF layout and the emission of each block."""

  def __init__(self, ctx: LoweringContext, op: Op):
    self.ctx = ctx
    self.space = RowSpace(tuple(op.attrs["row_shape"]), int(op.attrs["reduced_dims"]))
    self.shape, self.kept, self.columns = self.space.shape, self.space.kept, self.space.columns
    self.alias: dict[Value, Value] = {}
    self.kind: dict[Value, str] = {}
    self.steps: list[tuple[Op, int]] = []    # (compute op, its debug id), program order
    self.loaded: list[Value] = []            # outside values the group reads
    self.first_reader: dict[Value, int] = {}
    self._computed: dict[tuple, Value] = {}        # (op, operands, attrs, type) -> its result
    self._rule = ctx.builder.debug_entries[ctx.debug_id].rule  # the members' debug entries
    self.matmuls: dict[Op, attention_rows.RowMatmul] = {}  # rows computed on TensorE
    block = op.regions[0].block
    self._bind(block.args, op.operands)
    self._plan(block.ops[:-1])
    self.stored = [(self._canon(v), r) for v, r in zip(block.terminator.operands, op.results)]
    self._producer = {inner.result: inner for inner, _ in self.steps}
    self.on_chip = row_affine.plan(ctx, [inner for inner, _ in self.steps], self.shape,
                                   self._canon, {v for v, _ in self.stored})
    self.gpsimd = [inner for inner, _ in self.steps
                   if self.on_chip.get(inner, (row_affine.ABSORBED,))[0] != row_affine.ABSORBED]
    self.loaded = [v for v in self.loaded if v in self._tile_reads()]
    uses = collections.Counter(self._canon(v) for inner, _ in self.steps for v in inner.operands)
    uses.update(v for v, _ in self.stored)
    self.folded = self._fold_into_activations(uses)
    self.widened = self._widenings_into_reduces(uses)
    self.skipped = ({add for add, _ in self.folded.values()}
                    | {inner for inner, _ in self.steps if inner.result in self.widened}
                    | {inner for inner in self.on_chip if inner not in self.gpsimd})
    self.fused = self._scalar_tensor_tensors(uses)
    self.skipped |= set(self.fused.values())
    self.by_reciprocal = self._divides_by_reciprocal()
    self.narrowed = self._narrowing_converts(uses)
    self.skipped |= set(self.narrowed)
    self._written_dtype = {op.result: convert.result.dtype
                           for convert, op in self.narrowed.items()}
    self._narrowed_rows = {convert.result: op.result for convert, op in self.narrowed.items()}
    self.psum_rows = self._rows_left_in_psum()
    self.on_scalar, self.sums = choose_scalar_steps(self._row_steps(), self.columns,
                                                    ctx.target_spec)
    self.summed_by = {producer: reduce for reduce, producer in self.sums.items()}
    # Add-reduces that ScalarE runs as a copy of the row with its row sum (into a scratch row,
    # or over the row when it is its last reader).
    self.copy_sums = {inner for inner, _ in self.steps
                      if inner.name == "stablehlo.reduce" and inner in self.on_scalar}

  # --- the plan (compile time) ---------------------------------------------------------------

  def _canon(self, v: Value) -> Value:
    while v in self.alias:
      v = self.alias[v]
    return v

  def _bind(self, args: list[Value], values: list[Value]) -> None:
    for arg, value in zip(args, values):
      value = self._canon(value)
      self.alias[arg] = value
      if self.ctx.has_place(value):  # for the view rules of values read other than per row
        place = self.ctx.place(value)
        place = place if place.shape == arg.shape else place.reshaped(arg.shape)
        if place is not None:
          self.ctx.set_place(arg, place)
      if self.ctx.splat(value) is not None:
        self.ctx.set_splat(arg, self.ctx.splat(value))

  def _read(self, v: Value, debug: int) -> str:
    """The kind of a value the group reads; an outside value becomes a loaded operand."""
    v = self._canon(v)
    if v not in self.kind:
      self.kind[v] = ROW if v.shape == self.shape else STAT
      self.loaded.append(v)
      self.first_reader[v] = debug
    return self.kind[v]

  def _immediate_index(self, inner: Op) -> int | None:
    return None if inner.name == "stablehlo.convert" else splat_operand_index(self.ctx, inner)

  def _plan(self, ops: list[Op]) -> None:
    for inner in ops:
      if inner.name == FUSION:
        block = inner.regions[0].block
        self._bind(block.args, inner.operands)
        self._plan(block.ops[:-1])
        for result, value in zip(inner.results, block.terminator.operands):
          self.alias[result] = self._canon(value)
      elif inner.name == "stablehlo.constant":
        find_rule(inner, self.ctx).fn(self.ctx, inner)
      elif inner.name == attention_rows.MATMUL:
        debug = self.ctx.builder.debug(op=inner.name, name=inner.loc.name,
                                       location=inner.loc.position, lowering="fused",
                                       rule=self._rule)
        self.steps.append((inner, debug))
        self.kind[inner.result] = ROW
        lhs, rhs = (self.ctx.place(self._canon(v)) for v in inner.operands)
        self.matmuls[inner] = attention_rows.RowMatmul(self.ctx, inner, lhs, rhs, self.kept)
      elif inner.name in _VIEWS and self._canon(inner.operands[0]) in self._matmul_rows():
        self.alias[inner.result] = self._canon(inner.operands[0])  # the matmul's row tile
      elif inner.name in _VIEWS and self.space.stat_view(inner):
        self.alias[inner.result] = self._canon(inner.operands[0])  # the same tile or cell
      elif inner.name in _VIEWS:
        find_rule(inner, self.ctx).fn(self.ctx, inner)  # a view of an outside value over rows
      elif self._same_as_earlier(inner):
        continue
      else:
        debug = self.ctx.builder.debug(op=inner.name, name=inner.loc.name,
                                       location=inner.loc.position, lowering="fused",
                                       rule=self._rule)
        self.steps.append((inner, debug))
        immediate = self._immediate_index(inner)
        kinds = [self._read(v, debug) for i, v in enumerate(inner.operands)
                 if i != immediate and not (inner.name == "stablehlo.reduce" and i == 1)]
        self.kind[inner.result] = (STAT if inner.name == "stablehlo.reduce"
                                   or (ROW not in kinds and inner.name != "stablehlo.iota")
                                   else ROW)

  def _matmul_rows(self) -> set[Value]:
    return {m.result for m in self.matmuls}

  def _same_as_earlier(self, inner: Op) -> bool:
    """Whether an earlier member computes the same op of the same values (JAX's layernorm writes
    `x - mean` twice): then its result stands for this one (the same bits)."""
    operands = tuple((v.type, repr(self.ctx.splat(v))) if self.ctx.splat(v) is not None
                     else self._canon(v) for v in inner.operands)
    key = (inner.name, operands, repr(sorted(inner.attrs.items())), inner.result.type)
    earlier = self._computed.setdefault(key, inner.result)
    if earlier is inner.result:
      return False
    self.alias[inner.result] = earlier
    return True

  def _tile_reads(self) -> set[Value]:
    """The values some member reads from a tile (on-chip members read only a select's row)."""
    reads = set()
    for inner, _ in self.steps:
      special = self.on_chip.get(inner)
      if inner in self.matmuls:
        continue  # its operands are loaded by attention_rows.py
      if special is None:
        immediate = self._immediate_index(inner)
        reads.update(self._canon(v) for i, v in enumerate(inner.operands) if i != immediate)
      elif special[0] == row_affine.SELECT:
        reads.add(self._canon(inner.operands[special[2]]))
    return reads | {v for v, _ in self.stored}

  def _stat_index(self, inner: Op) -> int | None:
    """Of a binary op of a row tile and a statistic (no immediate): the statistic's operand."""
    if self.kind[inner.result] != ROW or len(inner.operands) != 2:
      return None
    kinds = [self.kind[self._canon(v)] for v in inner.operands]
    return kinds.index(STAT) if sorted(kinds) == [ROW, STAT] else None

  def _widenings_into_reduces(self, uses: collections.Counter) -> dict[Value, Value]:
    """Converts of a narrower float row to fp32 read only by reduces (JAX's mean of bf16) and
    by float arithmetic with fp32 results (attention's softmax of bf16 scores and its vjp):
    {the fp32 row: the narrow one}. `tensor_reduce` widens its source exactly into the fp32
    partial itself, and VectorE and ScalarE compute float inputs in fp32 (docs/numerics.md), so
    the readers read the narrow tile and the convert's pass goes."""
    widening_reads = collections.Counter()
    for inner, _ in self.steps:
      if inner.name == "stablehlo.reduce":
        widening_reads[self._canon(inner.operands[0])] += 1
      elif self._computes_in_fp32(inner):
        widening_reads.update(self._canon(v) for v in inner.operands)
    widened = {}
    for inner, _ in self.steps:
      if inner.name != "stablehlo.convert" or self.kind[inner.result] != ROW:
        continue
      source = self._canon(inner.operands[0])
      if (inner.result.dtype == DType.F32 and source.dtype.is_float and source.dtype.itemsize < 4
          and self.kind[source] == ROW and uses[inner.result] == widening_reads[inner.result]):
        widened[inner.result] = source
    return widened

  def _rounds_on_scalar(self, inner: Op) -> bool:
    """A float row convert whose source is the fp32 result of arithmetic: ScalarE's copy(x · 1)
    rounds it as VectorE's tensor_copy does (x · 1 is x in fp32; a computed NaN is already quiet,
    so the multiply keeps its bits too)."""
    if inner.name != "stablehlo.convert" or self.kind[inner.result] != ROW:
      return False
    return (inner.result.dtype.is_float and inner.result.dtype != DType.F64
            and self._computed_fp32_row(self._canon(inner.operands[0])))

  def _computed_fp32_row(self, v: Value) -> bool:
    """An fp32 row some member's arithmetic computes (so any NaN in it is quiet)."""
    producer = self._producer.get(v)
    return (v.dtype == DType.F32 and self.kind[v] == ROW and producer is not None
            and producer.name in _ARITHMETIC and producer not in self.on_chip)

  def _computes_in_fp32(self, inner: Op) -> bool:
    """Float arithmetic (no select, compare or convert) with an fp32 row or statistic result:
    its fp32 inputs may be narrower floats widened exactly by the engine instead."""
    return (inner.name not in ("stablehlo.convert", "stablehlo.reduce", "stablehlo.select",
                               "stablehlo.compare", "stablehlo.clamp")
            and inner not in self.on_chip and inner.result.dtype == DType.F32
            and all(v.dtype.is_float for v in inner.operands))

  def _fold_into_activations(self, uses: collections.Counter) -> dict[Op, tuple[Op, int]]:
    """ScalarE functions of an fp32 `row ± statistic` (softmax's exp(x - max)) or of an fp32
    `statistic ± immediate` (layernorm's rsqrt(var + eps)) used by nothing else: {the function:
    (the add/subtract, its statistic's or immediate's operand)}. ScalarE computes
    func(x · scale + bias) in fp32, so x · ±1 + ±s is the same fp32 sum VectorE would round, and
    one VectorE pass (or one [p, 1] instruction) goes. Not for an immediate bias of +0, which
    ScalarE skips (−0 would stay −0)."""
    producer = {inner.result: inner for inner, _ in self.steps}
    folded = {}
    for inner, _ in self.steps:
      if (inner.name in ("stablehlo.reduce", "stablehlo.convert") or inner in self.on_chip
          or inner in self.matmuls):
        continue
      alu = alu_of(inner)
      source = self._canon(inner.operands[0])
      add = producer.get(source)
      if (alu.arity != 1 or alu not in SCALAR_ENGINE or add is None or uses[source] != 1
          or source.dtype != DType.F32 or add.name not in ("stablehlo.add", "stablehlo.subtract")):
        continue
      immediate = self._immediate_index(add)
      if self.kind[inner.result] == ROW and immediate is None:
        index = self._stat_index(add)
        if index is not None:
          folded[inner] = (add, index)
      elif (self.kind[inner.result] == STAT and immediate is not None
            and self.kind[self._canon(add.operands[1 - immediate])] == STAT
            and not self._positive_zero_bias(add, immediate)):
        folded[inner] = (add, immediate)
    return folded

  def _scalar_tensor_tensors(self, uses: collections.Counter) -> dict[Op, Op]:
    """{b: a} of fp32 row ops b = a op1 y or y op1 a (y another row) reading a = x op0 s (x a
    row, s a statistic or an immediate) that nothing else reads (layernorm's
    ((x - mean) · rstd) · g): VectorE's scalar_tensor_tensor computes both with the
    intermediate in fp32, the bits of the two instructions, in a tensor_tensor's time."""
    producer = {inner.result: inner for inner, _ in self.steps}
    stored = {v for v, _ in self.stored}
    fused = {}
    for b, _ in self.steps:
      if (b.name in ("stablehlo.reduce", "stablehlo.convert") or b in self.skipped
          or b in self.on_chip or b in self.matmuls or self.kind[b.result] != ROW
          or len(b.operands) != 2
          or alu_of(b).arity != 2
          or self._immediate_index(b) is not None):
        continue
      srcs = [self._canon(v) for v in b.operands]
      if srcs[0] is srcs[1] or any(self.kind[v] != ROW for v in srcs):
        continue
      for v in srcs:
        a = producer.get(v)
        if (a is None or a in self.skipped or a in fused.values() or uses[v] != 1 or v in stored
            or a in self.on_chip  # computed from the block's coordinates (row_affine.py)
            or a in self.matmuls  # computed on TensorE (attention_rows.py)
            or a.name in ("stablehlo.reduce", "stablehlo.convert") or alu_of(a).arity != 2
            or (self._immediate_index(a) is None and self._stat_index(a) is None)):
          continue
        values = [self._canon(w) for w in a.operands] + srcs + [b.result]
        if all(w.dtype == DType.F32 for w in values):
          fused[b] = a
          break
    return fused

  def _narrowing_converts(self, uses: collections.Counter) -> dict[Op, Op]:
    """{convert: op} of converts of an fp32 statistic or row to bf16 or fp16 (JAX's mean of
    bf16 rows; softmax's probabilities and their vjp cast back to bf16) that nothing else
    reads, made by float arithmetic computed in fp32: that op writes the narrow cell or row
    itself. Every engine computes it in fp32 and rounds once to the destination's dtype, as the
    convert would (a pass fewer per block for a row). Not for ScalarE's row sums of what it
    writes (the sum would then be of the narrow values) nor the opt-in reciprocal."""
    producer = {inner.result: inner for inner, _ in self.steps}
    stored = {v for v, _ in self.stored}
    narrowed = {}
    for convert, _ in self.steps:
      if (convert.name != "stablehlo.convert" or convert in self.skipped
          or convert.result.dtype not in (DType.BF16, DType.F16)):
        continue
      source = self._canon(convert.operands[0])
      op = producer.get(source)
      if (op is None or op in self.skipped or op in self.by_reciprocal or uses[source] != 1
          or source in stored or source.dtype != DType.F32 or op in self.on_chip
          or op in self.matmuls or self.kind[source] != self.kind[convert.result]
          or op.name in ("stablehlo.reduce", "stablehlo.convert") or op in narrowed.values()):
        continue
      if self.kind[source] == STAT and all(v.dtype == DType.F32 for v in op.operands):
        narrowed[convert] = op
      elif self.kind[source] == ROW and self._computes_in_fp32(op):
        narrowed[convert] = op
    return narrowed

  def _rows_left_in_psum(self) -> set[Value]:
    """The matmul member's row (the fusion's only matmul) when a scalar_tensor_tensor reads it
    and only VectorE and ScalarE do (GpSimd and DMA do not reach PSUM): its eviction rounds it
    into the PSUM banks it was accumulated in, in place (each bank's fp32 values are read
    before the narrower ones land on them), and its readers read it there: VectorE's two-tensor
    ops take N cycles, not 2N, with one input in PSUM (docs/neuroncore.md)."""
    if len(self.matmuls) != 1:
      return set()
    (matmul,) = self.matmuls
    row = matmul.result
    reads = [inner for inner, _ in self.steps
             if any(self._tile_owner(v) is row for v in inner.operands)]
    if (row in {self._tile_owner(v) for v, _ in self.stored}
        or any(inner in self.on_chip for inner in reads) or row.dtype.itemsize > 4):
      return set()
    stt_reads = set(self.fused) | set(self.fused.values())
    return {row} if any(inner in stt_reads for inner in reads) else set()

  def _scalar_tensor_tensor(self, b: Op, dst: TileAP, tiles: dict[Value, TileAP]) -> None:
    """b(a(x, s), y) (`_scalar_tensor_tensors`) as one scalar_tensor_tensor."""
    a = self.fused[b]
    immediate = self._immediate_index(a)
    if immediate is None:
      index = self._stat_index(a)
      alu0, s = alu_of(a), tiles[self._canon(a.operands[index])]
    else:
      index = immediate
      alu0, s = vector_form(alu_of(a), self.ctx.splat_scalar(a.operands[index]), index == 0)
    x = tiles[self._canon(a.operands[1 - index])]
    first = self._canon(b.operands[0]) is a.result
    y = tiles[self._canon(b.operands[1 if first else 0])]
    self.ctx.builder.scalar_tensor_tensor(alu0, alu_of(b), dst, x, s, y, reverse0=index == 0,
                                          reverse1=not first, debug=self.ctx.debug_id)

  def _positive_zero_bias(self, add: Op, immediate: int) -> bool:
    """Whether s ± immediate's ScalarE bias (±immediate) is +0."""
    value = float(self.ctx.splat_scalar(add.operands[immediate]).value)
    negated = add.name == "stablehlo.subtract" and immediate == 1
    return value == 0 and (math.copysign(1.0, value) < 0) == negated

  def _divides_by_reciprocal(self) -> set[Op]:
    """Under the opt-in, the float `row / statistic` ops (statistic second, no immediate)."""
    if not divides_by_reciprocal():
      return set()
    return {inner for inner, _ in self.steps
            if inner.name == "stablehlo.divide" and inner not in self.skipped
            and self.kind[inner.result] == ROW and self._stat_index(inner) == 1
            and self._immediate_index(inner) is None
            and all(v.dtype.is_float and v.dtype != DType.F64
                    for v in list(inner.operands) + [inner.result])}

  def _sum_sources(self) -> list[Value]:
    """The rows add-reduces read."""
    return [self._canon(inner.operands[0]) for inner, _ in self.steps
            if inner.name == "stablehlo.reduce"]

  def _row_steps(self) -> list[RowStep]:
    """The emitted members as row_engines.py weighs them."""
    fast_modes = str(self.ctx.target_spec.get("core_version", "")) != "NeuronCore-v2"
    steps = []
    for inner, _ in self.steps:
      if inner in self.skipped or inner in self.on_chip:
        continue  # on-chip members run on GpSimd (row_affine.py)
      result = inner.result
      if inner in self.matmuls:  # its PSUM evictions: VectorE copies or ScalarE copy(x · 1)
        summed = any(v is result for v in self._sum_sources())
        steps.append(RowStep(inner, VECTOR if summed else EITHER,
                             vector_cycles("copy", None, self.columns, False, fast_modes),
                             result, None))
        continue
      row = result if self.kind[result] == ROW else None
      if inner.name == "stablehlo.reduce":
        source = self._canon(inner.operands[0])
        read = self.widened.get(source, source)
        # ScalarE's row sum widens what it wrote exactly as tensor_reduce widens its source.
        summable = (inner.attrs["reducer"] == "add" and self.kind[read] == ROW
                    and read.dtype.is_float and read.dtype != DType.F64)
        # A reduce ScalarE's copy may take over: only for rows longer than an instruction's
        # fixed cost, below which both engines cost about that and the move buys nothing (and
        # a counted loop of such blocks then waited more than its unrolled form).
        fixed = float(self.ctx.target_spec["instruction_fixed_cycles"])
        copyable = summable and self.columns >= fixed
        cycles = vector_cycles("reduce", REDUCERS[inner.attrs["reducer"]], self.columns,
                               read.dtype.itemsize == 2, fast_modes)
        steps.append(RowStep(inner, EITHER if copyable else VECTOR, cycles, None,
                             read if summable else None))
        continue
      if inner in self.folded:
        steps.append(RowStep(inner, SCALAR, 0.0, row, None))
        continue
      alu = None if inner.name == "stablehlo.convert" else alu_of(inner)
      immediate = self._immediate_index(inner)
      srcs = [self._canon(v) for i, v in enumerate(inner.operands) if i != immediate]
      two_byte = all(v.dtype.itemsize == 2 for v in srcs + [result])
      if alu is not None and alu.arity == 1 and alu in SCALAR_ENGINE:
        steps.append(RowStep(inner, SCALAR, 0.0, row, None))
        continue
      if row is None and immediate is None:  # a [p, 1] statistic of statistics: VectorE's
        steps.append(RowStep(inner, VECTOR, 64.0, None, None))
        continue
      rows = sum(self.kind[v] == ROW for v in srcs)
      kind = ("copy" if alu is None else "tensor_tensor" if rows >= 2
              else "unary" if alu.arity == 1 else "tensor_scalar")
      if inner in self.by_reciprocal:  # a multiply by the reciprocal, on either engine
        cycles = vector_cycles(kind, Alu.MUL, self.columns, two_byte, fast_modes)
        steps.append(RowStep(inner, EITHER, cycles, row, None))
        continue
      value = None if immediate is None else self.ctx.splat_scalar(inner.operands[immediate])
      if alu is not None and row is not None:  # a row divided by an exact reciprocal's
        alu, value = vector_form(alu, value, immediate == 0)  # immediate: a multiply
      read = list(inner.operands) + (list(self.fused[inner].operands) if inner in self.fused
                                     else [])
      psum_input = any(self._tile_owner(v) in self.psum_rows for v in read)
      cycles = vector_cycles(kind, alu, self.columns if row else 1, two_byte, fast_modes,
                             psum_input)
      float_immediate = value is None or value.dtype.is_float
      scalar_form = (alu is not None and alu.arity == 2 and float_immediate
                     and not zero_bias(TileOp(inner, alu, srcs, value, immediate == 0))
                     and has_scalar_form(alu, [v.dtype for v in srcs] + [result.dtype],
                                         rows if row else len(srcs),
                                         len(srcs) == 2 and srcs[0] is srcs[1]))
      scalar_form = scalar_form or self._rounds_on_scalar(inner)
      negates = alu == Alu.SUB and immediate is None and self._stat_index(inner) == 1
      steps.append(RowStep(inner, EITHER if scalar_form else VECTOR, cycles, row, None, negates))
    return steps

  # --- the SBUF layout and the blocks --------------------------------------------------------

  def _tile_owner(self, v: Value) -> Value:
    """The value whose tile a read of `v` reads: a widened convert's readers read its narrow
    source, a narrowed convert's readers the row its producer wrote narrow."""
    v = self._canon(v)
    while v in self.widened or v in self._narrowed_rows:
      v = self.widened.get(v) or self._narrowed_rows[v]
    return v

  def _last_reads(self) -> dict[Value, int]:
    """Each tile's last reading step (numbered as `self.steps`, len(steps) for the stores): a
    member computed inside a later one (a sum folded into an activation, the first op of a
    scalar_tensor_tensor) reads its operands at that later step."""
    index = {inner: k for k, (inner, _) in enumerate(self.steps)}
    reads_at = {add: index[act] for act, (add, _) in self.folded.items()}
    reads_at.update({a: index[b] for b, a in self.fused.items()})
    last: dict[Value, int] = {}
    for k, (inner, _) in enumerate(self.steps):
      for v in inner.operands:
        owner = self._tile_owner(v)
        last[owner] = max(last.get(owner, -1), reads_at.get(inner, k))
    for v, _ in self.stored:
      last[self._tile_owner(v)] = len(self.steps)
    return last

  def _row_spans(self, per_block: list[Value]) -> tuple[dict, set[Op]]:
    """(RowLayout's spans of a block, the copy sums that write over the row they sum). Steps
    are numbered as `self.steps`, -1 the loads, the stores after the last. Spans: the rows
    loaded per block, the rows the emitted members write (in the dtype they are written), an
    affine compare's int32 differences (during its step) and ScalarE's fp32 scratch row (from
    the first copy sum that needs it to the last; one that is the last reader of its fp32 row
    writes its copy over that row instead), each row read until its `_last_reads` step."""
    index = {inner: k for k, (inner, _) in enumerate(self.steps)}
    last = self._last_reads()
    width = lambda dtype: _tile_bytes(self.columns, dtype.itemsize)
    spans = {v: (-1, last.get(v, -1), width(v.dtype)) for v in per_block if self.kind[v] == ROW}
    for k, (inner, _) in enumerate(self.steps):
      v = inner.result
      if (inner in self.skipped or inner.name == "stablehlo.reduce" or self.kind[v] != ROW
          or v in self.psum_rows):
        continue
      spans[v] = (k, max(k, last.get(v, k)), width(self._written_dtype.get(v, v.dtype)))
      special = self.on_chip.get(inner)
      if special and special[0] == row_affine.IOTA and special[1].compare is not None:
        spans[(inner, DIFFERENCE)] = (k, k, width(special[1].view.dtype))
    in_place = {inner for inner in self.copy_sums
                if (source := self._tile_owner(inner.operands[0])) in spans
                and source.dtype == DType.F32 and last.get(source) == index[inner]}
    steps = [index[inner] for inner in self.copy_sums - in_place]
    if steps:  # written (never read) by the other copy sums
      spans[SCRATCH] = (min(steps), max(steps), width(DType.F32))
    return spans, in_place

  def emit(self) -> None:
    ctx = self.ctx
    saved_debug = ctx.debug_id
    views = {v: self._view(ctx.place(v), v) for v in self.loaded}
    out_views = [self._view(ctx.new_result(r), r) for _, r in self.stored]
    affine_views = [_View(self.on_chip[inner][1].view, len(self.kept)) for inner in self.gpsimd]
    matmul_views = [view for m in self.matmuls.values() for view in m.views]
    persistent = [v for v in self.loaded if self.kind[v] == ROW
                  and all(s == 0 for s in views[v].row_strides)]
    per_block = [v for v in self.loaded if v not in persistent]
    block_views = [views[v] for v in per_block] + out_views
    # The rows a block writes: not those of members computed inside others (`skipped`).
    computed_rows = [inner.result for inner, _ in self.steps
                     if inner not in self.skipped and self.kind[inner.result] == ROW]
    widest = max([v.dtype.itemsize for v in computed_rows + self.loaded
                  if self.kind[v] == ROW] + [1])
    tile = _tile_bytes(self.columns, widest)
    # A matmul member's operand panels stay resident beside the persistent rows.
    panel_bytes = sum(attention_rows.PANELS * plan.panel_bytes for plan in self.matmuls.values())
    budget = ctx.sbuf.arena_bytes - SBUF_SLOT_BYTES - len(persistent) * tile - panel_bytes
    spans, self._sums_in_place = self._row_spans(per_block)
    if SCRATCH in spans and RowLayout(spans, reuse=True).nbytes > budget:
      # No room for ScalarE's scratch row: the sums that need it run on VectorE.
      dropped = self.copy_sums - self._sums_in_place
      self.on_scalar -= dropped
      self.copy_sums -= dropped
      del spans[SCRATCH]
    _, wanted = pipeline_stages(self._step_engines(), MAX_BANKS)

    def banks_of(layout: RowLayout) -> int:
      """The fewest banks that hold all the stages in flight (at least two), else as many as
      fit; counts dividing 24 or 8, so the banks' ring keeps the loop period short
      (tile_loops.tile_period)."""
      fitting = [b for b in (1, 2, 4, 6, 8) if b * layout.nbytes <= budget]
      return min([b for b in fitting if b >= max(2, wanted)] or [max(fitting, default=0)])

    # Tiles are reused only where that puts more blocks in flight.
    layout = max((RowLayout(spans, reuse) for reuse in (False, True)), key=banks_of)
    row_bytes, banks = layout.nbytes, banks_of(layout)
    if banks == 0:
      raise CompileError(f"row fusion of rows {list(self.shape)}: {row_bytes} bytes of rows "
                         f"per partition do not fit SBUF on {ctx.builder.target}")
    self._psum = {}
    banks_free = ([] if not self.matmuls else ctx.psum.take_all() if self.psum_rows
                  else [ctx.psum.take() for _ in range(ctx.psum.count)])
    for inner, plan in self.matmuls.items():
      sets = plan.psum_sets(len(banks_free), banks)
      self._psum[inner] = [banks_free[s * plan.psum_banks:(s + 1) * plan.psum_banks]
                           for s in range(sets)]
    self._stage, stage_count = self._pipeline_stages(banks)
    arena = ctx.sbuf.take_arena()
    self._cells_base = arena
    self._cells_per_bank = SBUF_SLOT_BYTES // banks // CELL_BYTES
    panels_base = arena + SBUF_SLOT_BYTES + len(persistent) * tile
    rows_base = panels_base + panel_bytes
    self._bank_rows = [rows_base + b * row_bytes for b in range(banks)]
    self._layout = layout
    # Before step k, the rows whose last reader ran (their tiles are reused from then on).
    self._released = collections.defaultdict(list)
    for key, (_, last, _) in layout.spans.items():
      if isinstance(key, Value) and last < len(self.steps):
        self._released[last + 1].append(key)
    blocks = self._blocks(block_views + affine_views + matmul_views)
    self._affine_at = {inner: len(block_views) + i for i, inner in enumerate(self.gpsimd)}
    self._matmul_at, self._panels = {}, {}
    for j, (inner, plan) in enumerate(self.matmuls.items()):
      self._matmul_at[inner] = len(block_views) + len(affine_views) + len(plan.views) * j
      self._panels[inner] = [panels_base + (attention_rows.PANELS * j + i) * plan.panel_bytes
                             for i in range(attention_rows.PANELS)]
    partitions = max(p for p, _, _ in blocks)
    resident = {v: arena + SBUF_SLOT_BYTES + i * tile for i, v in enumerate(persistent)}

    def load_resident():
      for v, address in resident.items():
        ctx.debug_id = self.first_reader[v]
        ctx.dma(self._tile(v.dtype, partitions, address),
                views[v].ap(views[v].place.offset, 0, partitions))

    def start(item):
      index, (p, offsets, strides), steps = item
      return self._block_stages(index % banks, p, offsets, strides, steps, per_block, views,
                                resident, out_views, stage_count)

    init_loads = sum(op.name == "stablehlo.reduce" and ctx.splat(op.operands[1]) is None
                     for op, _ in self.steps)
    period = tile_period([(1, banks)], len(block_views) + init_loads + len(self.matmuls),
                         int(ctx.target_spec["dma_queues"]))
    if affine_views or matmul_views:  # whole runs of the innermost kept dim, where the affine
      # offsets repeat and a matmul's rhs panel changes
      inner_rows = collapse_dims(self.kept, *(v.row_strides for v
                                              in block_views + affine_views + matmul_views)
                                 )[0][-1]
      period = math.lcm(period, -(-inner_rows // ctx.partitions))
    if stage_count > 1:  # enough blocks per loop iteration for its pipeline to fill
      period = periods_holding(period, PIPELINED_BLOCKS)

    def emit_blocks(numbered):
      """The resident rows' loads, then the blocks [(index, block)] software-pipelined, a
      periodic prefix of them as a counted loop."""
      load_resident()
      self._panel_held = {}
      shapes = [((p, strides), offsets) for _, (p, offsets, strides) in numbered]
      periods = periodic_prefix(shapes, period) if loops_enabled() else 0
      rest = [(j, block, None) for j, block in numbered]
      if periods >= MIN_PERIODS:
        with ctx.builder.loop(periods):
          run_pipelined([(j, block, steps) for (j, block), steps
                         in zip(numbered, offset_steps(shapes, period))], stage_count, start)
        rest = rest[periods * period:]
        self._panel_held = {}  # after the loop, the panels hold its last iteration's
      run_pipelined(rest, stage_count, start)

    numbered = list(enumerate(blocks))
    # An LNC=2 device: the first half of the row blocks on one physical core, the rest on the
    # other (each core loads the resident rows into its own SBUF).
    # (A matmul member's rows count as if loaded: the work they stand for.)
    share = tile_shares(ctx, blocks, sum(v.place.size * v.place.dtype.itemsize
                                         for v in block_views)
                        + sum(inner.result.type.nbytes for inner in self.matmuls))
    if share is None:
      emit_blocks(numbered)
    else:
      emit_shares(ctx, [(numbered[:share],), (numbered[share:],)], emit_blocks)
    ctx.debug_id = saved_debug

  def _pipeline_stages(self, banks: int) -> tuple[dict[Op, int], int]:
    """row_engines.pipeline_stages over at most `banks` stages, merged further until a block
    reads its PSUM rows (`_rows_left_in_psum`) at most as many stages after its matmul as there
    are PSUM sets: block b + sets takes block b's banks, and run_pipelined emits its matmul
    that many slots after block b's, after block b's stage of the same slot (oldest first);
    a read emitted later would read the newer block's sums."""
    engines = self._step_engines()
    if not self.psum_rows:
      return pipeline_stages(engines, banks)
    ((matmul, sets),) = ((m, len(p)) for m, p in self._psum.items())
    last_reads = self._last_reads()
    readers = [last_reads[v] for v in self.psum_rows]
    for limit in range(banks, 1, -1):
      stages, count = pipeline_stages(engines, limit)
      # A read by a member computed inside a later one happens in that later one.
      last = max(next(stages[op] for op, _ in self.steps[k:] if op in stages) for k in readers)
      if last - stages[matmul] <= sets:
        return stages, count
    return pipeline_stages(engines, 1)  # one stage: every read comes with the matmul

  def _step_engines(self) -> list[tuple[Op, str | None]]:
    """Each emitted member and the engine its row work runs on (None: none of its own)."""
    engines = []
    for inner, _ in self.steps:
      if inner in self.skipped:
        continue
      if inner in self.sums:
        engines.append((inner, None))  # its sum came with the ScalarE pass that made the row
        continue
      if inner in self.on_chip:
        engines.append((inner, GPSIMD))
        continue
      if inner in self.matmuls:
        engines.append((inner, TENSOR))
        continue
      scalar = (inner in self.on_scalar or inner in self.folded
                or (inner.name not in ("stablehlo.reduce", "stablehlo.convert")
                    and alu_of(inner).arity == 1 and alu_of(inner) in SCALAR_ENGINE))
      engines.append((inner, SCALAR if scalar else VECTOR))
    return engines

  def _view(self, place: Place, value: Value) -> _View:
    """A row value's place, or a statistic's viewed over the kept dims (copied to a dense
    temporary first when its strides cannot be reshaped)."""
    if value.shape == self.shape:
      return _View(place, len(self.kept))
    kept = place.reshaped(self.kept) or self.ctx.dense_place(value).reshaped(self.kept)
    return _View(kept, len(self.kept))

  def _blocks(self, views: list[_View]) -> list[tuple[int, tuple[int, ...], tuple[int, ...]]]:
    """(rows, HBM offset per view, partition stride per view) of each block of ≤ P rows."""
    shape, strides = collapse_dims(self.kept, *(v.row_strides for v in views))
    bases = [v.place.offset for v in views]
    blocks = []
    for outer in itertools.product(*(range(c) for c in shape[:-1])):
      outer_bases = [b + sum(i * s[d] for d, i in enumerate(outer)) for b, s in zip(bases, strides)]
      for start in range(0, shape[-1], self.ctx.partitions):
        p = min(self.ctx.partitions, shape[-1] - start)
        blocks.append((p, tuple(b + start * s[-1] for b, s in zip(outer_bases, strides)),
                       tuple(s[-1] for s in strides)))
    return blocks

  # --- one block ------------------------------------------------------------------------------

  def _tile(self, dtype: DType, partitions: int, address) -> TileAP:
    return TileAP(Memory.SBUF, dtype, 0, partitions, address, ((1, self.columns),))

  def _block_stages(self, bank, p, offsets, strides, steps, per_block, views, resident,
                    out_views, stage_count):
    """A generator emitting one block, one pipeline stage per step (its loads with the first,
    its stores with the last)."""
    ctx, b = self.ctx, self.ctx.builder
    tiles: dict[Value, TileAP] = {v: self._tile(v.dtype, p, a) for v, a in resident.items()}
    base, placed = self._bank_rows[bank], self._layout.offsets
    cells = itertools.count()

    def cell(dtype: DType) -> TileAP:
      k = next(cells)
      if k >= self._cells_per_bank:
        raise CompileError(f"row fusion of rows {list(self.shape)} needs more than "
                           f"{self._cells_per_bank} statistics per block")
      address = self._cells_base + (bank * self._cells_per_bank + k) * CELL_BYTES
      return TileAP(Memory.SBUF, dtype, 0, p, address, ((1, 1),))

    def new(v: Value) -> TileAP:
      dtype = self._written_dtype.get(v, v.dtype)
      tiles[v] = self._tile(dtype, p, base + placed[v]) if self.kind[v] == ROW else cell(dtype)
      return tiles[v]

    def release(v: Value) -> None:
      """After its last reader: the tile goes back to the layout (a later read would fail)."""
      dead = tiles[v]
      for key in [key for key, t in tiles.items() if t is dead]:
        del tiles[key]

    def as_row(v: Value) -> TileAP:
      """A row tile, or a statistic viewed over the row (stride 0)."""
      t = tiles[v]
      return t if self.kind[v] == ROW else dataclasses.replace(t, free=((0, self.columns),))

    for k, v in enumerate(per_block):
      ctx.debug_id = self.first_reader[v]
      ctx.dma(new(v), views[v].ap(offsets[k], strides[k], p),
              steps={"src": steps[k]} if steps else None)
    sums: dict[Op, TileAP] = {}  # reduce op -> the fp32 partial a ScalarE pass summed into
    scratch: list[TileAP] = []   # the block's fp32 row that ScalarE's copy sums write

    def row_sum(inner: Op) -> TileAP | None:
      """The partial of the reduce whose row sum `inner`'s ScalarE pass makes, if any."""
      reduce = self.summed_by.get(inner)
      if reduce is None:
        return None
      sums[reduce] = cell(DType.F32)
      return sums[reduce]

    stage = 0
    for k, (inner, debug) in enumerate(self.steps):
      for v in self._released.get(k, ()):
        release(v)
      if inner in self.narrowed:  # its producer wrote the narrow cell
        tiles[inner.result] = tiles[self.narrowed[inner].result]
      if inner in self.skipped:
        if inner.result in self.widened:  # its readers read the narrow row
          tiles[inner.result] = tiles[self.widened[inner.result]]
        continue  # folded into the ScalarE function or the reduces that read it
      while stage < self._stage[inner]:
        yield  # other blocks' stages are emitted meanwhile
        stage += 1
      ctx.debug_id = debug
      if inner in self.on_chip:
        scratch_row = lambda dtype, inner=inner: self._tile(dtype, p,
                                                             base + placed[(inner, DIFFERENCE)])
        self._on_chip(inner, new(inner.result), as_row, p, offsets, strides, steps, scratch_row)
        continue
      if inner in self.matmuls:
        if inner.result in self.psum_rows:
          tiles[inner.result] = self._psum_row(inner, bank, p)
        else:
          new(inner.result)
        self._matmul(inner, tiles[inner.result], bank, p, offsets, strides, steps, debug)
        continue
      if inner in self.folded:
        dst = new(inner.result)
        self._activation_of_sum(inner, dst, tiles, cell, row_sum(inner))
        continue
      if inner.name == "stablehlo.reduce":
        source = self._canon(inner.operands[0])
        src = as_row(self.widened.get(source, source))
        if inner in self.copy_sums:  # ScalarE copies the row (exactly, to fp32) and sums it
          if not scratch and inner not in self._sums_in_place:
            scratch.append(self._tile(DType.F32, p, base + placed[SCRATCH]))
          sums[inner] = cell(DType.F32)
          copy = src if inner in self._sums_in_place else scratch[0]
          activate(ctx, Alu.COPY, copy, src, ONE, ZERO, sums[inner])
        self._reduce(inner, src, cell, tiles, sums.get(inner))
        continue
      immediate_index = self._immediate_index(inner)
      srcs = [self._canon(v) for i, v in enumerate(inner.operands) if i != immediate_index]
      dst = new(inner.result)
      if inner in self.fused:
        self._scalar_tensor_tensor(inner, dst, tiles)
        continue
      if inner in self.by_reciprocal:
        self._multiply_by_reciprocal(inner, dst, tiles[srcs[0]], srcs[1], tiles, cell,
                                     row_sum(inner))
        continue
      if inner in self.on_scalar:
        immediate = (None if immediate_index is None
                     else ctx.splat_scalar(inner.operands[immediate_index]))
        self._scalar_form(inner, dst, srcs, immediate, immediate_index == 0, tiles, cell,
                          row_sum(inner))
        continue
      if inner.name == "stablehlo.convert":
        b.tensor_copy(dst, as_row(srcs[0]) if self.kind[inner.result] == ROW else tiles[srcs[0]],
                      debug=debug)
        continue
      stat_operand = [i for i, v in enumerate(srcs) if self.kind[v] == STAT]
      if self.kind[inner.result] == ROW and len(srcs) == 2 and len(stat_operand) == 1:
        (i,) = stat_operand
        b.tensor_scalar(alu_of(inner), dst, tiles[srcs[1 - i]], tiles[srcs[i]], reverse=i == 0,
                        debug=debug)
        continue
      operands = [as_row(v) if self.kind[inner.result] == ROW else tiles[v] for v in srcs]
      immediate = (None if immediate_index is None
                   else ctx.splat_scalar(inner.operands[immediate_index]))
      emit_alu_op(ctx, alu_of(inner), dst, operands, immediate, reverse=immediate_index == 0)
    first_store = len(per_block)
    for k, ((v, result), view) in enumerate(zip(self.stored, out_views), start=first_store):
      src = as_row(v) if result.shape == self.shape else tiles[v]
      ctx.dma(view.ap(offsets[k], strides[k], p), src,
              steps={"dst": steps[k]} if steps else None)
    for _ in range(stage_count - stage):
      yield

  def _on_chip(self, inner: Op, dst: TileAP, as_row, p, offsets, strides, steps,
               scratch_row) -> None:
    """An iota-derived member on GpSimd (row_affine.py), its view's pattern in this block."""
    special, k = self.on_chip[inner], self._affine_at[inner]
    src = (as_row(self._canon(inner.operands[special[2]]))
           if special[0] == row_affine.SELECT else None)
    ((column_step, _),) = _View(special[1].view, len(self.kept)).columns
    pattern = dict(base=offsets[k], partition_step=strides[k], free_steps=(column_step,),
                   steps={"base": steps[k]} if steps else None)
    row_affine.emit(self.ctx, special, dst, src, pattern, scratch_row)

  def _matmul(self, inner: Op, dst: TileAP, bank: int, p, offsets, strides, steps,
              debug: int) -> None:
    """A matmul member's rows into `dst` (attention_rows.py); its operand panel is loaded when
    the previous block emitted was of another batch."""
    plan, k = self.matmuls[inner], self._matmul_at[inner]
    at = [(offsets[i], strides[i], steps[i] if steps else None)
          for i in range(k, k + len(plan.views))]
    batch = at[-1][0] // plan.m
    held = self._panel_held.get(inner)
    load = held is None or held[0] != batch
    panel = held[1] if not load else 0 if held is None else (held[1] + 1) % attention_rows.PANELS
    self._panel_held[inner] = (batch, panel)
    psum = self._psum[inner][bank % len(self._psum[inner])]
    plan.emit_block(dst, p, at, load, self._panels[inner][panel], psum, inner in self.on_scalar,
                    debug)

  def _psum_row(self, inner: Op, bank: int, p: int) -> TileAP:
    """A row left in PSUM (`_rows_left_in_psum`): the first bytes of this block's banks."""
    psum = self._psum[inner][bank % len(self._psum[inner])]
    return TileAP(Memory.PSUM, inner.result.dtype, 0, p, psum[0], ((1, self.columns),))

  def _activation_of_sum(self, inner: Op, dst: TileAP, tiles: dict[Value, TileAP], cell,
                         dst_sum: TileAP | None) -> None:
    """func(row + s), func(s + row), func(s - row): activation(row · ±1 + s); func(row - s):
    activation(row + (-s)), the negated statistic (exact) made once per block; func(s ± c) of a
    statistic s and an immediate c: activation(s · ±1 ± c)."""
    add, index = self.folded[inner]
    operands = [self._canon(v) for v in add.operands]
    row, stat = tiles[operands[1 - index]], operands[index]
    subtract = add.name == "stablehlo.subtract"
    if self._immediate_index(add) == index:  # func(s ± immediate) of a statistic s
      value = float(self.ctx.splat_scalar(add.operands[index]).value)
      bias = Scalar(DType.F32, -value if subtract and index == 1 else value)
    else:
      bias = self._negated(stat, tiles, cell) if subtract and index == 1 else tiles[stat]
    scale = -1.0 if subtract and index == 0 else 1.0
    activate(self.ctx, alu_of(inner), dst, row, Scalar(DType.F32, scale), bias, dst_sum)

  def _negated(self, stat: Value, tiles: dict, cell) -> TileAP:
    """-stat as (-0) - stat, made once per block: exactly -stat for numbers and zeros, and a NaN
    keeps its sign, so row + that is row - stat to the bit (a negated NaN would flip the sign of
    the NaN the subtract returns)."""
    negated = (stat, Alu.NEG)
    if negated not in tiles:
      tiles[negated] = cell(stat.dtype)
      self.ctx.builder.tensor_scalar(Alu.SUB, tiles[negated], tiles[stat], Scalar(DType.F32, -0.0),
                                     reverse=True, debug=self.ctx.debug_id)
    return tiles[negated]

  def _multiply_by_reciprocal(self, inner: Op, dst: TileAP, row: TileAP, stat: Value,
                              tiles: dict, cell, dst_sum: TileAP | None) -> None:
    """row · (1 / stat) (TRN_ROW_DIVIDE_BY_RECIPROCAL): the reciprocal once per block (fp32),
    the multiply on the engine row_engines.py chose."""
    b, debug = self.ctx.builder, self.ctx.debug_id
    key = (stat, Alu.RECIPROCAL)
    if key not in tiles:
      tiles[key] = cell(DType.F32)
      b.tensor_unary(Alu.RECIPROCAL, tiles[key], tiles[stat], debug=debug)
    if inner in self.on_scalar:
      activate(self.ctx, Alu.COPY, dst, row, tiles[key], ZERO, dst_sum)
    else:
      b.tensor_scalar(Alu.MUL, dst, row, tiles[key], debug=debug)

  def _scalar_form(self, inner: Op, dst: TileAP, srcs: list[Value], immediate: Scalar | None,
                   reverse_immediate: bool, tiles: dict, cell, dst_sum: TileAP | None) -> None:
    """A row op on ScalarE: a ScalarE function, or one row_engines.py moved there."""
    if inner.name == "stablehlo.convert":  # copy(x · 1): rounded to dst's dtype
      activate(self.ctx, Alu.COPY, dst, tiles[srcs[0]], ONE, ZERO, dst_sum)
      return
    alu, immediate = vector_form(alu_of(inner), immediate, reverse_immediate)
    if alu.arity == 1 or (immediate is None and len(srcs) == 2 and srcs[0] is srcs[1]):
      scalar_pass(self.ctx, alu, dst, tiles[srcs[0]], None, False, None, dst_sum)
      return
    if immediate is not None:
      row, s, reverse = tiles[srcs[0]], Scalar(DType.F32, float(immediate.value)), reverse_immediate
      negated = Scalar(DType.F32, -s.value)
    else:
      i = next(k for k, v in enumerate(srcs) if self.kind[v] == STAT)
      row, s, reverse = tiles[srcs[1 - i]], tiles[srcs[i]], i == 0
      negated = None if reverse or alu != Alu.SUB else self._negated(srcs[i], tiles, cell)
    scalar_pass(self.ctx, alu, dst, row, s, reverse, negated, dst_sum)

  def _reduce(self, inner: Op, src: TileAP, cell, tiles: dict[Value, TileAP],
              summed: TileAP | None) -> None:
    """reduce.py's rows layout for a whole row: one fp32 (integers: own dtype) partial (or the
    one a ScalarE pass `summed` into), the init value, the result dtype."""
    b, debug = self.ctx.builder, self.ctx.debug_id
    operand, init = inner.operands
    partial = summed
    if partial is None:
      partial = cell(DType.F32 if operand.dtype.is_float else operand.dtype)
      b.tensor_reduce(REDUCERS[inner.attrs["reducer"]], partial, src, debug=debug)
    scratch = None if self.ctx.splat(init) is not None else cell(partial.dtype)
    finish_partial(self.ctx, inner.attrs["reducer"], init, partial, scratch)
    if inner.result.dtype == partial.dtype:
      tiles[inner.result] = partial
      return
    tiles[inner.result] = cell(inner.result.dtype)
    b.tensor_copy(tiles[inner.result], partial, debug=debug)


@register_lowering(ROW_FUSION, kind="native",
                   reads_views=attention_rows.reads_as_matmul_operand)
def lower_row_fusion(ctx: LoweringContext, op: Op) -> None:
  _RowFusion(ctx, op).emit()
