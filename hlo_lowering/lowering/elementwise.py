"""Native tiled lowerings of elementwise ops: DMA in, VectorE or ScalarE, DMA out.

Each op maps to one ALU op. Transcendentals run on ScalarE (`activation`), everything else on
VectorE (`tensor_unary` / `tensor_tensor` / `tensor_scalar` / `tensor_ternary`), except where
elementwise_engines.py moves an op to ScalarE (the same bits) or fuses a tensor_scalar-form op into
the tensor_tensor that reads it (`scalar_tensor_tensor`), and pipelines the tiles. A binary op with
one operand that is a compile-time splat uses `tensor_scalar` with an immediate instead of
loading a tile. Broadcast operands arrive as stride-0 views, so no broadcast is materialised.
Convert is a single DMA, which converts between any two dtypes with the ALU's rules.
`lower_ops` is the tiled loop over a list of ops sharing one iteration space: one op alone here,
a trn.fusion cluster in fusion.py.

A loaded operand that a tile reads with free stride 0 (a per-row value broadcast along the free
axis: softmax's max and sum, layernorm's mean) is DMA'd compactly, one element per partition,
into a [P, 1] tile, instead of one element-sized DMA run per element: a binary op takes it as
VectorE's per-partition scalar operand (`tensor_scalar`, as NKI's tensor_scalar takes a [P, 1]
tile), any other op reads it through a free-stride-0 SBUF access pattern.
"""

from __future__ import annotations

import collections
import dataclasses
import math

import numpy as np

from hlo_lowering.errors import CompileError
from hlo_lowering.ir import Op, Value
from hlo_lowering.lowering.affine_index import affine_select, analyse
from hlo_lowering.lowering.allocators import SBUF_SLOT_BYTES
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.core_split import emit_shares, tile_shares
from hlo_lowering.lowering.elementwise_engines import (TileOp, TileSchedule, emit_on_scalar,
                                                       schedule, zero_bias)
from hlo_lowering.lowering.places import Place
from hlo_lowering.lowering.registry import register_lowering
from hlo_lowering.lowering.row_engines import run_pipelined
from hlo_lowering.lowering.stage_buffers import Lifetime, StageBuffers
from hlo_lowering.lowering.tile_loops import emit_plan, loop_plan, periods_holding, tile_period
from hlo_lowering.lowering.tiling import tile_grid, tiles
from hlo_lowering.program import Alu, DType, Scalar, TileAP

UNARY = {
    "stablehlo.abs": Alu.ABS, "stablehlo.negate": Alu.NEG, "stablehlo.exponential": Alu.EXP,
    "stablehlo.exponential_minus_one": Alu.EXPM1, "stablehlo.log": Alu.LOG,
    "stablehlo.log_plus_one": Alu.LOG1P, "stablehlo.tanh": Alu.TANH,
    "stablehlo.logistic": Alu.LOGISTIC, "stablehlo.sqrt": Alu.SQRT, "stablehlo.rsqrt": Alu.RSQRT,
    "stablehlo.cbrt": Alu.CBRT, "stablehlo.sine": Alu.SIN, "stablehlo.cosine": Alu.COS,
    "stablehlo.tan": Alu.TAN, "stablehlo.floor": Alu.FLOOR, "stablehlo.ceil": Alu.CEIL,
    "stablehlo.round_nearest_even": Alu.ROUND_NEAREST_EVEN,
    "stablehlo.round_nearest_afz": Alu.ROUND_NEAREST_AFZ, "stablehlo.sign": Alu.SIGN,
    "stablehlo.not": Alu.NOT, "stablehlo.popcnt": Alu.POPCNT,
    "stablehlo.count_leading_zeros": Alu.CLZ, "stablehlo.is_finite": Alu.IS_FINITE,
}
BINARY = {
    "stablehlo.add": Alu.ADD, "stablehlo.subtract": Alu.SUB, "stablehlo.multiply": Alu.MUL,
    "stablehlo.divide": Alu.DIV, "stablehlo.remainder": Alu.REM, "stablehlo.maximum": Alu.MAX,
    "stablehlo.minimum": Alu.MIN, "stablehlo.power": Alu.POW, "stablehlo.atan2": Alu.ATAN2,
    "stablehlo.and": Alu.AND, "stablehlo.or": Alu.OR, "stablehlo.xor": Alu.XOR,
    "stablehlo.shift_left": Alu.SHIFT_LEFT,
    "stablehlo.shift_right_logical": Alu.SHIFT_RIGHT_LOGICAL,
    "stablehlo.shift_right_arithmetic": Alu.SHIFT_RIGHT_ARITHMETIC,
}
TERNARY = {"stablehlo.select": Alu.SELECT, "stablehlo.clamp": Alu.CLAMP}
_ELEMENTWISE = frozenset({*UNARY, *BINARY, *TERNARY, "stablehlo.compare"})
COMPARE = {"EQ": Alu.EQ, "NE": Alu.NE, "LT": Alu.LT, "LE": Alu.LE, "GT": Alu.GT, "GE": Alu.GE}

# Evaluated by ScalarE's lookup tables: func(x * scale + bias) in fp32.
SCALAR_ENGINE = frozenset({Alu.EXP, Alu.EXPM1, Alu.LOG, Alu.LOG1P, Alu.TANH, Alu.LOGISTIC,
                           Alu.SQRT, Alu.RSQRT, Alu.CBRT, Alu.SIN, Alu.COS, Alu.TAN, Alu.ERF})


# Buffer keys beside the values': ScalarE's [P, 1] zero bias (elementwise_engines.zero_bias),
# and (op, DIFFERENCE) for an affine compare's difference before its compare.
ZERO, DIFFERENCE = "zero bias", "difference"
# Tiles per pipeline stage in a loop body, so the pipeline fills between the drains at its ends.
PIPELINED_TILES = 2
# The smallest tile (elements per partition) worth a deeper pipeline: below it, the per-
# instruction fixed cost (202 cycles) outweighs what the overlap of the two engines gains.
MIN_PIPELINED_FREE = 1024
# Tiles this large (elements per partition) pay at most ~10 % in fixed instruction costs, so
# giving the next rule SBUF to overlap with is worth more than larger tiles (stage_buffers.py).
GOOD_FREE = 2048


def alu_of(op: Op) -> Alu:
  if op.name == "stablehlo.compare":
    return COMPARE[op.attrs["comparison_direction"]]
  return {**UNARY, **BINARY, **TERNARY}[op.name]


def _data_dtype(op: Op) -> DType:
  """The dtype that picks the compute domain (select and clamp: the data, not the predicate)."""
  return op.operands[1].dtype if op.name in TERNARY else op.operands[0].dtype


def _alu_accepts(op: Op) -> bool:
  if op.name == "stablehlo.compare" and op.attrs.get("compare_type") == "TOTALORDER":
    return False  # total order (-NaN < -Inf ... NaN) is not an ALU compare
  alu = alu_of(op)
  floating = _data_dtype(op).is_float
  return not ((floating and alu.is_integer_only) or (not floating and alu.is_float_only))


def splat_operand_index(ctx: LoweringContext, op: Op) -> int | None:
  """Index of the operand of a binary op to pass as an immediate, if one is a splat."""
  if len(op.operands) != 2:
    return None
  for index in (1, 0):
    if ctx.splat(op.operands[index]) is not None and ctx.splat(op.operands[1 - index]) is None:
      return index
  return None


def _exact_reciprocal(immediate) -> Scalar | None:
  """1 / a float immediate that is a power of two, when its dtype holds that exactly: x / c and
  x · (1 / c) are then the same real number, so both round to the same result (bit-identical)."""
  if not isinstance(immediate, Scalar) or not immediate.dtype.is_float:
    return None
  value = immediate.value
  if not math.isfinite(value) or value == 0 or math.frexp(value)[0] not in (0.5, -0.5):
    return None
  reciprocal = 1.0 / value
  if float(np.asarray(reciprocal, immediate.dtype.numpy)) != reciprocal:
    return None
  return Scalar(immediate.dtype, reciprocal)


def vector_form(alu: Alu, immediate, reverse: bool) -> tuple[Alu, object]:
  """(alu, immediate) as emitted: a divide by an exact reciprocal's immediate is a multiply."""
  if alu == Alu.DIV and not reverse and (reciprocal := _exact_reciprocal(immediate)) is not None:
    return Alu.MUL, reciprocal  # a multiply: ScalarE can run it too (elementwise_engines.py)
  return alu, immediate


def emit_alu_op(ctx: LoweringContext, alu: Alu, dst: TileAP, srcs: list[TileAP],
                immediate: Scalar | TileAP | None, reverse: bool) -> None:
  """`immediate`: the scalar operand of a binary op (an immediate or a [P, 1] tile), whose
  other operand is srcs[0]; `reverse`: the scalar is the op's first operand."""
  b, debug = ctx.builder, ctx.debug_id
  alu, immediate = vector_form(alu, immediate, reverse)
  if immediate is not None:
    b.tensor_scalar(alu, dst, srcs[0], immediate, reverse=reverse, debug=debug)
  elif alu.arity == 1 and alu in SCALAR_ENGINE:
    b.activation(alu, dst, srcs[0], debug=debug)
  elif alu.arity == 1:
    b.tensor_unary(alu, dst, srcs[0], debug=debug)
  elif alu.arity == 2:
    b.tensor_tensor(alu, dst, srcs[0], srcs[1], debug=debug)
  else:
    b.tensor_ternary(alu, dst, srcs[0], srcs[1], srcs[2], debug=debug)


def _per_row_operand(op: Op, tiled: list[Value], per_row: dict[Value, TileAP],
                     immediate: Scalar | None) -> int | None:
  """Index of the operand of a binary op to pass as a [P, 1] per-partition scalar: the one of
  its two tiled operands that is loaded per row, when the other is not."""
  if immediate is not None or op.name == "stablehlo.convert" or len(tiled) != 2:
    return None
  rows = [v in per_row for v in tiled]
  return rows.index(True) if rows.count(True) == 1 else None


def is_fusible(op: Op) -> bool:
  """Whether `op` is lowered by this module's tiled rule or by convert's, so that it can run on
  SBUF tiles inside a cluster (passes/fuse_elementwise.py)."""
  if op.name == "stablehlo.convert":
    # Tiles hold no f64: one DMA reads it from HBM, or widens a result into it.
    return DType.F64 not in (op.operands[0].dtype, op.result.dtype)
  if op.name == "stablehlo.iota":  # computed from the tiles' coordinates (affine_index.py)
    return op.result.dtype.is_signed_int
  return op.name in _ELEMENTWISE and _alu_accepts(op)


def _on_chip_plans(ctx: LoweringContext, ops: list[Op], outputs) -> dict[Op, tuple]:
  """Ops computed from the tiles' coordinates (affine_index.py): op -> ("absorbed",) when only
  other such ops read it, ("iota", Affine) when its value is needed in a tile, ("select",
  Affine, tile operand index, fill) for one affine_select."""
  affine = analyse(ctx, ops)
  selects = {op: found for op in ops if (found := affine_select(ctx, op, affine)) is not None}
  plans, tile_readers = {}, set()
  for op in reversed(ops):
    if op in selects:
      predicate, index, fill = selects[op]
      plans[op] = ("select", predicate, index, fill)
      tile_readers.add(op.operands[index])
    elif op.result in affine:
      needed = op.result in outputs or op.result in tile_readers
      plans[op] = ("iota", affine[op.result]) if needed else ("absorbed",)
    else:
      tile_readers.update(op.operands)
  return plans


def lower_ops(ctx: LoweringContext, ops: list[Op], outputs: dict[Value, Value],
              debug_ids: dict[Op, int] | None = None) -> None:
  """Lowers elementwise `ops` (program order, one result shape) as one tiled loop.

  Values not produced by `ops` are read from their places (loaded once per tile, or passed as
  immediates when they are splats); `outputs` maps each value to store to the IR value whose
  result tensor receives it (`ctx.new_result`). Per tile: one DMA per loaded operand, one
  instruction per op into an SBUF tile of its result dtype (so every op rounds as it does alone),
  one DMA per output; iota-derived values are computed on chip (`_on_chip_plans`). `debug_ids`
  tags each op's instructions (default: ctx.debug_id)."""
  shape = ops[-1].result.shape
  produced = {op.result for op in ops}
  on_chip = _on_chip_plans(ctx, ops, outputs)
  plans, loaded, affine_views = [], [], []
  for op in ops:
    special = on_chip.get(op)
    if special == ("absorbed",):
      continue
    immediate_index = None
    if special is not None:
      tiled = [op.operands[special[2]]] if special[0] == "select" else []
      affine_views.append(special[1].view)
    else:
      immediate_index = None if op.name == "stablehlo.convert" else splat_operand_index(ctx, op)
      tiled = [v for i, v in enumerate(op.operands) if i != immediate_index]
    immediate = None if immediate_index is None else ctx.splat_scalar(op.operands[immediate_index])
    for v in tiled:
      if v not in produced and v not in loaded:
        loaded.append(v)
    plans.append((op, tiled, immediate, immediate_index, special))
  # Operands of a lower rank (clamp's 0-d bounds) broadcast over the result.
  views = {v: ctx.place(v) if v.shape == shape else ctx.place(v).broadcast(shape, [])
           for v in loaded}
  # Operands viewing the same elements (one value broadcast twice) share one load.
  first_viewer = {}
  same = {v: first_viewer.setdefault(views[v], v) for v in loaded}
  loaded = [v for v in loaded if same[v] is v]
  plans = [(op, [same.get(v, v) for v in tiled], immediate, index, special)
           for op, tiled, immediate, index, special in plans]
  stored = list(outputs)
  places = [ctx.new_result(outputs[v]) for v in stored] + [views[v] for v in loaded]
  first_affine = len(places)
  places += affine_views
  widest = max([p.dtype.itemsize for p in places] + [op.result.dtype.itemsize for op in ops])
  debug_ids = debug_ids or {}
  saved_debug = ctx.debug_id
  first_user = {}
  for op, tiled, *_ in plans:
    for v in tiled:
      first_user.setdefault(v, op)
  layout = next(iter(tiles(places, ctx.partitions, 1)), None)
  if layout is None:
    return  # an empty iteration space
  # Loaded operands read with free stride 0 in every tile: one element per partition.
  per_row = frozenset(v for k, v in enumerate(loaded, start=len(stored))
                      if layout.free_strides[k] == 0)

  forms = []
  for op, tiled, immediate, immediate_index, special in plans:
    if special is not None:
      continue
    if op.name == "stablehlo.convert":
      forms.append(TileOp(op, None, tiled, None, False))
    elif (scalar_index := _per_row_operand(op, tiled, per_row, immediate)) is not None:
      forms.append(TileOp(op, alu_of(op), [tiled[1 - scalar_index]], tiled[scalar_index],
                          scalar_index == 0))
    else:
      reverse = immediate_index == 0
      alu, s = vector_form(alu_of(op), immediate, reverse)
      forms.append(TileOp(op, alu, tiled, s, reverse))
  form_of = {t.op: t for t in forms}
  # A tile's ops as elementwise_engines.schedule weighs them: (op, tile operands, on GpSimd).
  schedule_ops = [(op, tiled, special is not None) for op, tiled, _, _, special in plans]
  affine_index = {plan[0]: first_affine + i
                  for i, plan in enumerate(p for p in plans if p[4] is not None)}
  reads = collections.Counter(v for _, tiled, *_ in plans for v in tiled)
  shared = {v for v, n in reads.items() if n > 1} | set(outputs)
  plan, buffers = _pipeline(ctx, plans, loaded, per_row, outputs, schedule_ops, forms, shared,
                            SBUF_SLOT_BYTES // widest)
  stages = plan.stages
  absorbed = {a.op: b for b, a in plan.fused.items()}

  def emit(index, tile, steps=None):
    """Tile `index`'s loads, ops and stores; `steps`: per enclosing loop (outermost first), each
    view's offset move per iteration. A generator: it yields where each of the tile's `stages`
    pipeline stages ends."""
    sbuf, rows = {}, {}
    buffer = lambda key: buffers.tile(key, index, tile.partitions, tile.free)
    for k, v in enumerate(loaded, start=len(stored)):
      ctx.debug_id = debug_ids.get(first_user[v], saved_debug)
      src = tile.hbm_ap(k, places[k].tensor)
      if v in per_row:  # one element per partition, read back with stride 0
        rows[v] = buffer(v)
        sbuf[v] = dataclasses.replace(rows[v], free=((0, tile.free),))
        src = dataclasses.replace(src, dims=(src.dims[0], (0, 1)))
        ctx.dma(rows[v], src, steps=_moved(steps, k, "src"))
        continue
      sbuf[v] = buffer(v)
      ctx.dma(sbuf[v], src, steps=_moved(steps, k, "src"))
    zero_written = False
    stage = 0
    for op, tiled, immediate, immediate_index, special in (plans[i] for i in plan.order):
      if op in absorbed:
        continue  # computed inside the scalar_tensor_tensor that reads it
      for stage in range(stage, plan.stage[op]):
        yield
      stage = plan.stage[op]
      ctx.debug_id = debug_ids.get(op, saved_debug)
      dst = buffer(op.result)
      srcs = [] if op in plan.fused else [sbuf[v] for v in tiled]
      if special is not None:
        _emit_on_chip(ctx, special, dst, srcs, tile, affine_index[op], steps,
                      lambda: buffer((op, DIFFERENCE)))
      elif op in plan.fused:
        a, b = plan.fused[op], form_of[op]
        first = b.srcs[0] is a.op.result
        s = rows[a.s] if isinstance(a.s, Value) else a.s
        ctx.builder.scalar_tensor_tensor(a.alu, b.alu, dst, sbuf[a.srcs[0]], s,
                                         sbuf[b.srcs[1 if first else 0]], reverse0=a.reverse,
                                         reverse1=not first, debug=ctx.debug_id)
      elif op in plan.scalar:
        t = form_of[op]
        zero = buffer(ZERO) if zero_bias(t) else None
        if zero is not None and not zero_written:
          ctx.builder.iota(zero, base=0, partition_step=0, free_steps=(0,), debug=ctx.debug_id)
          zero_written = True
        s = rows[t.s] if isinstance(t.s, Value) else t.s
        emit_on_scalar(ctx, t, dst, [sbuf[v] for v in t.srcs], s, zero)
      elif op.name == "stablehlo.convert":
        ctx.builder.tensor_copy(dst, srcs[0], debug=ctx.debug_id)  # converts as DMA does
      elif (scalar_index := _per_row_operand(op, tiled, rows, immediate)) is not None:
        emit_alu_op(ctx, alu_of(op), dst, [srcs[1 - scalar_index]], rows[tiled[scalar_index]],
                 reverse=scalar_index == 0)
      else:
        emit_alu_op(ctx, alu_of(op), dst, srcs, immediate, reverse=immediate_index == 0)
      sbuf[op.result] = dst
      if op.result in outputs:
        k = stored.index(op.result)
        ctx.dma(tile.hbm_ap(k, places[k].tensor), dst, steps=_moved(steps, k, "dst"))
    for stage in range(stage, stages):
      yield

  period = tile_period([(1, buffers.period)], len(loaded) + len(stored),
                       int(ctx.target_spec["dma_queues"]))
  if stages > 1:  # enough tiles per loop iteration for its pipeline to fill
    period = periods_holding(period, PIPELINED_TILES * stages)
  all_tiles = list(tiles(places, ctx.partitions, buffers.max_free))
  shapes = [((t.partitions, t.free, t.partition_strides, t.free_strides), t.offsets)
            for t in all_tiles]
  grid = tile_grid(places, ctx.partitions, buffers.max_free)

  def emit_tiles(start, stop):
    """Tiles [start, stop) in order as `loop_plan` nests them. Each run of tiles is one
    software pipeline (it drains where a loop body ends), unrolled (TRN_UNROLL_LOOPS=1) as in
    the loops, so both forms run the same schedule."""
    nest = loop_plan(shapes, period, grid, start, stop)
    emit_plan(ctx.builder, nest, shapes, lambda run: run_pipelined(
        [(i, all_tiles[i], steps) for i, steps in run], stages, lambda item: emit(*item), True))

  # An LNC=2 device: the tiles' first half on one physical core, the rest on the other.
  share = tile_shares(ctx, all_tiles, sum(p.size * p.dtype.itemsize for p in places),
                      [t.partitions * t.free for t in all_tiles])
  if share is None:
    emit_tiles(0, len(all_tiles))
  else:
    emit_shares(ctx, [(0, share), (share, len(all_tiles))], emit_tiles)
  ctx.debug_id = saved_debug


def _pipeline(ctx: LoweringContext, plans: list, loaded: list[Value], per_row: frozenset,
              outputs, schedule_ops: list, forms: list[TileOp], shared: set[Value],
              cap_free: int) -> tuple[TileSchedule, StageBuffers]:
  """The tiles' schedule and buffers: one pipeline stage per engine change (fold 1) when that
  keeps tiles of at least MIN_PIPELINED_FREE elements per partition (or what one stage would),
  else levels folded in pairs until it does. The schedule is weighed at the tile size it gets."""
  fold, free = 1, cap_free
  while True:
    plan = schedule(ctx, schedule_ops, forms, free, SCALAR_ENGINE, shared, fold)
    buffers = StageBuffers(ctx.sbuf, _lifetimes(plans, forms, loaded, per_row, outputs, plan),
                           cap_free, GOOD_FREE)
    if buffers.max_free < free and fold == 1 and free == cap_free:
      free = max(buffers.max_free, 1)
      continue  # weigh the engines again at the tile size the buffers allow
    if buffers.max_free >= MIN_PIPELINED_FREE or plan.stages == 1:
      break
    fold, free = fold * 2, cap_free
  if buffers.max_free == 0:
    values = sum(not l.per_row for l in buffers.lifetimes.values())
    raise CompileError(f"an elementwise tile loop of {values} tile values does not fit in SBUF "
                       f"on {ctx.builder.target} ({ctx.sbuf.arena_bytes} bytes per partition)")
  buffers.take()
  return plan, buffers


def _lifetimes(plans: list, forms: list[TileOp], loaded: list[Value], per_row: frozenset,
               outputs, plan: TileSchedule) -> dict:
  """{buffer key: Lifetime} of a tile's values under `plan`: each loaded operand (written by its
  DMA in stage 0), each op's result, an affine compare's difference ((op, DIFFERENCE)) and
  ScalarE's zero bias (ZERO)."""
  absorbed = {a.op: b for b, a in plan.fused.items()}
  inside = {op.result for op in absorbed}  # held by the scalar_tensor_tensor, no buffer
  spans = {v: [0, 0, v.dtype] for v in loaded}  # key -> [first, last, dtype]
  for op, tiled, _, _, special in plans:
    for v in tiled:
      if v not in inside:
        spans[v][1] = max(spans[v][1], plan.stage[absorbed.get(op, op)])
    if op in absorbed:
      continue
    stage = plan.stage[op]
    spans[op.result] = [stage, stage, op.result.dtype]
    if special is not None and special[0] == "iota" and special[1].compare is not None:
      spans[(op, DIFFERENCE)] = [stage, stage, special[1].view.dtype]
  zero_stages = [plan.stage[t.op] for t in forms if t.op in plan.scalar and zero_bias(t)]
  if zero_stages:
    spans[ZERO] = [min(zero_stages), max(zero_stages), DType.F32]
  return {key: Lifetime(first, last, key in loaded, key in outputs,
                        key in per_row or key is ZERO, dtype)
          for key, (first, last, dtype) in spans.items()}


def _moved(steps, view: int, key: str) -> list[dict] | None:
  """An instruction's `steps=` for operand `key` reading view `view` of the tiling: its offset's
  move per iteration of each enclosing loop (None outside loops)."""
  return [{key: per_view[view]} for per_view in steps] if steps else None


def _emit_on_chip(ctx: LoweringContext, special: tuple, dst: TileAP, srcs: list[TileAP], tile,
                  k: int, steps, difference_tile) -> None:
  """An iota-derived value (view k of the tiling) on GpSimd: its affine pattern is the view's
  offset (stepping with the loop like an HBM offset) and partition / free strides;
  `difference_tile()`: the tile for a compare's affine difference."""
  b, debug = ctx.builder, ctx.debug_id
  pattern = dict(base=tile.offsets[k], partition_step=tile.partition_strides[k],
                 free_steps=(tile.free_strides[k],), debug=debug,
                 steps=_moved(steps, k, "base"))
  predicate = special[1]
  if special[0] == "select":
    b.affine_select(predicate.compare, dst, srcs[0], fill=special[3], **pattern)
  elif predicate.compare is None:
    b.iota(dst, **pattern)
  else:  # the difference, then its compare with 0
    difference = difference_tile()
    b.iota(difference, **pattern)
    b.tensor_scalar(predicate.compare, dst, difference, Scalar(difference.dtype, 0), debug=debug)


def lower_elementwise(ctx: LoweringContext, op: Op) -> None:
  """One op alone: the tiled loop of a one-op cluster."""
  lower_ops(ctx, [op], {op.result: op.result})


def lower_convert(ctx: LoweringContext, op: Op) -> None:
  """One DMA: the DMA engines convert dtypes with the same rules as the ALU. A broadcast operand
  (stride 0 on some dims; a gradient's splat cotangent) converts only its distinct elements,
  and the result is the same broadcast of them (a DMA run per element otherwise)."""
  source = ctx.place(op.operands[0])
  broadcast = [st == 0 and n > 1 for st, n in zip(source.strides, source.shape)]
  if source.size and any(broadcast) and not ctx.output_planned(op.result):
    distinct = tuple(1 if b else n for b, n in zip(broadcast, source.shape))
    tensor = ctx.builder.tensor(kind="temporary", dtype=op.result.dtype, shape=distinct, index=0,
                                name=f"t{len(ctx.builder.tensors)}")
    converted = Place.dense(tensor, distinct, op.result.dtype)
    ctx.dma(converted.collapsed_ap(),
            Place(source.tensor, source.offset, distinct, source.strides, source.dtype).ap())
    ctx.set_place(op.result, converted.broadcast(op.result.shape, range(len(distinct))))
    scalar = _exact_conversion(ctx.splat(op.operands[0]), op.result.dtype)
    if scalar is not None:
      ctx.set_splat(op.result, scalar)  # consumers take it as an immediate, not a stride-0 load
    return
  out = ctx.new_result(op.result)
  if out.size:
    ctx.dma(out.collapsed_ap(), source.ap())


def _exact_conversion(scalar, dtype: DType):
  """`scalar` (a known splat, or None) in `dtype` when the conversion is exact (no rounding for
  the DMA and numpy to disagree on), else None."""
  if scalar is None:
    return None
  converted = np.asarray(scalar).astype(dtype.numpy)
  with np.errstate(invalid="ignore", over="ignore"):
    exact = converted.astype(np.asarray(scalar).dtype) == scalar
  return converted[()] if exact else None


def _describe(name: str) -> str:
  """The condition `_alu_accepts` tests for ops named `name`, in words (coverage report)."""
  if name == "stablehlo.compare":
    return ("any dtype (float compare_type TOTALORDER is first rewritten to a SIGNED compare by "
            "expand-total-order-compare)")
  alu = {**UNARY, **BINARY, **TERNARY}[name]
  return ("float operands" if alu.is_float_only else
          "integer or bool operands" if alu.is_integer_only else "always (any dtype)")


for _name in (*UNARY, *BINARY, *TERNARY, "stablehlo.compare"):
  register_lowering(_name, kind="native", when=_alu_accepts,
                    describe=_describe(_name))(lower_elementwise)
register_lowering("stablehlo.convert", kind="native")(lower_convert)
