"""Which engine runs each row op of a row fusion block (row_fusion.py), VectorE or ScalarE, and
the software pipeline that overlaps the two engines across blocks.

A row fusion of softmax or a norm is VectorE-bound when every pass over its rows runs there. Some
passes have a ScalarE form with the same bits, since ScalarE computes func(x · scale + bias) in
fp32 (an immediate zero bias adds nothing) and rounds once to dst's dtype as VectorE does:
- row · s, row + s, row − s, s − row (s a per-partition statistic or an immediate; float data):
  copy(row · s), copy(row · 1 + s), copy(row · 1 + (−s)), copy(row · −1 + s); x − s = x + (−s)
  and s − x = −x + s exactly in IEEE arithmetic (−s made as (−0) − s);
- row · row (the same tile): square(row);
- the add-reduce of a row a ScalarE instruction writes: that instruction's own row sum
  (activation_reduce's dst_sum, folded in tensor_reduce's order over the values as written);
- any other float add-reduce (row_fusion.py offers it for rows of at least an instruction's
  fixed cost): copy(row · 1) into an fp32 scratch row (exact, bf16 widened as tensor_reduce
  widens it) with that row sum.
Of the placements of the movable passes, the one whose busier engine has the least estimated
time (below) is taken, so VectorE and ScalarE share a block's work; a ScalarE row − s also
counts the [p, 1] −s that VectorE makes for it (a NaN s keeps its sign: row_fusion.py). The
costs follow the timing model (docs/timing-model.md); they only steer the choice. Engines run
their streams in order, so a block whose passes alternate between the engines would keep each
waiting on the other; the blocks are therefore emitted as a software
pipeline (`run_pipelined`): a block's ops are cut into stages where the engine changes, and each
engine's stream interleaves stage k of block b with stage k + 1 of block b − 1 and so on.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

from hlo_lowering.ir import Op, Value
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.program import Alu, DType, Scalar, TileAP

VECTOR, SCALAR, EITHER = "vector", "scalar", "either"
_SCALED = frozenset({Alu.MUL, Alu.ADD, Alu.SUB})
_MIN_CYCLES = 64
_SUM_CYCLES = 64  # activation_reduce's row sum (the timing model's figure)
EXHAUSTIVE_STEPS = 10  # movable steps up to which every placement is weighed (2^10 of them)
ONE, ZERO = Scalar(DType.F32, 1.0), Scalar(DType.F32, 0.0)


class RowStep(NamedTuple):
  """One row fusion member as the engine choice sees it."""
  op: Op
  engine: str                # VECTOR, SCALAR (a ScalarE function) or EITHER (either engine;
                             # a reduce's ScalarE form is a copy of its row with the row sum)
  vector_cycles: float       # its VectorE cost (VECTOR and EITHER)
  row_result: Value | None   # the [p, C] row it writes (None: a statistic)
  sum_source: Value | None   # a float add-reduce's row (ScalarE may sum it), else None
  negates: bool = False      # its ScalarE form adds −s, which VectorE makes ([p, 1])


def has_scalar_form(alu: Alu, dtypes: list[DType], row_operands: int, same_operands: bool) -> bool:
  """Whether a row op of `alu` over `dtypes` (operands and result) has a bit-identical ScalarE
  form (the module docstring)."""
  if not all(d.is_float and d != DType.F64 for d in dtypes):
    return False
  if alu in _SCALED and row_operands == 1:
    return True
  return alu == Alu.MUL and row_operands == 2 and same_operands


def activate(ctx: LoweringContext, func: Alu, dst: TileAP, src: TileAP, scale, bias,
             dst_sum: TileAP | None) -> None:
  """ScalarE's func(src · scale + bias) (scale, bias: immediates or [p, 1] tiles): `activation`
  where its immediate scale and no sum do, else `activation_reduce`."""
  b, debug = ctx.builder, ctx.debug_id
  if dst_sum is None and isinstance(scale, Scalar):
    b.activation(func, dst, src, scale=scale.value, bias=bias, debug=debug)
  else:
    b.activation_reduce(func, dst, src, scale=scale, bias=bias, dst_sum=dst_sum, debug=debug)


def scalar_pass(ctx: LoweringContext, alu: Alu, dst: TileAP, row: TileAP, s, reverse: bool,
                negated_s, dst_sum: TileAP | None) -> None:
  """The ScalarE form (the module docstring) of alu(row) for a unary ScalarE function, of
  row · row when `s` is None, else of alu(row, s) (alu(s, row) when `reverse`); `negated_s`: −s
  for row − s."""
  if s is None:
    activate(ctx, alu if alu.arity == 1 else Alu.SQUARE, dst, row, ONE, ZERO, dst_sum)
  elif alu == Alu.MUL:
    activate(ctx, Alu.COPY, dst, row, s, ZERO, dst_sum)
  elif alu == Alu.ADD:
    activate(ctx, Alu.COPY, dst, row, ONE, s, dst_sum)
  elif reverse:  # s - row
    activate(ctx, Alu.COPY, dst, row, Scalar(DType.F32, -1.0), s, dst_sum)
  else:  # row - s = row + (-s)
    activate(ctx, Alu.COPY, dst, row, ONE, negated_s, dst_sum)


def vector_cycles(kind: str, alu: Alu | None, columns: int, two_byte: bool, fast_modes: bool,
                  psum_input: bool = False) -> float:
  """The timing model's VectorE cycles of one pass over a row of `columns` elements: kind
  "reduce", "tensor_tensor" (N, not 2N, with an input in PSUM), "ternary", or a one-input pass
  ("tensor_scalar", "copy", "unary")."""
  n = float(columns)
  fast = fast_modes and two_byte
  if kind == "reduce":
    return n / 2 if fast and alu in (Alu.ADD, Alu.MAX) else n
  if alu == Alu.RECIPROCAL:  # a divide costs what the instruction's other operators do
    return max(_MIN_CYCLES, 8 * n)
  if kind == "ternary":
    return max(_MIN_CYCLES, 3 * n)
  if kind == "tensor_tensor":
    return max(_MIN_CYCLES, n if fast or psum_input else 2 * n)
  return max(_MIN_CYCLES, n / 4 if fast and kind != "unary" else n)


def choose_scalar_steps(steps: list[RowStep], columns: int, target_spec: dict
                        ) -> tuple[set[Op], dict[Op, Op]]:
  """(the ops that run on ScalarE, {reduce op: the ScalarE op whose row sum it is}): of the
  movable steps' placements, the one whose busier engine's estimated time is shortest (then the
  least time on both): every placement when there are at most EXHAUSTIVE_STEPS, else single
  moves from all-VectorE while one shortens it."""
  vector_ghz = float(target_spec["vector_clock_ghz"])
  scalar_ghz = float(target_spec["scalar_clock_ghz"])
  fixed = float(target_spec["instruction_fixed_cycles"])  # every instruction's start-up
  row_ns = (fixed + max(_MIN_CYCLES, columns)) / scalar_ghz
  cell_ns = (fixed + _MIN_CYCLES) / scalar_ghz
  negate_ns = (fixed + _MIN_CYCLES) / vector_ghz
  sum_ns = _SUM_CYCLES / scalar_ghz
  reduce_of = {}
  for step in steps:
    if step.sum_source is not None:
      reduce_of.setdefault(step.sum_source, step)

  def place(moved: frozenset) -> tuple[tuple[float, float], set[Op], dict[Op, Op]]:
    on_vector = on_scalar = 0.0
    scalar, sums = set(), {}
    for step in steps:
      if step.op in sums:
        continue  # summed by the ScalarE pass that wrote its row
      if step.engine == VECTOR or (step.engine == EITHER and step.op not in moved):
        on_vector += (fixed + step.vector_cycles) / vector_ghz
        continue
      scalar.add(step.op)
      if _reduce_copy(step):
        on_scalar += row_ns + sum_ns
        continue
      on_scalar += row_ns if step.row_result is not None else cell_ns
      on_vector += negate_ns if step.negates else 0.0
      reduce = reduce_of.get(step.row_result) if step.row_result is not None else None
      if reduce is not None:
        sums[reduce.op] = step.op
        on_scalar += sum_ns
    return (max(on_vector, on_scalar), on_vector + on_scalar), scalar, sums

  movable = [step.op for step in steps if step.engine == EITHER]
  if len(movable) <= EXHAUSTIVE_STEPS:
    # Ties go to the placement that moves the earliest steps (the first in this order), which
    # lets ScalarE start while VectorE runs what only it can.
    placements = (frozenset(itertools.compress(movable, picks))
                  for picks in itertools.product((True, False), repeat=len(movable)))
    _, scalar, sums = min((place(m) for m in placements), key=lambda placed: placed[0])
    return scalar, sums
  moved = frozenset()
  best = place(moved)
  while True:
    trial = min((place(moved ^ {op}) + (moved ^ {op},) for op in movable), key=lambda t: t[0])
    if trial[0] >= best[0]:
      return best[1], best[2]
    best, moved = trial[:3], trial[3]


def _reduce_copy(step: RowStep) -> bool:
  """A float add-reduce that ScalarE may also run, as a copy of its row with the row sum."""
  return step.engine == EITHER and step.row_result is None and step.sum_source is not None


def pipeline_stages(engines: list[tuple[Op, str | None]], banks: int) -> tuple[dict[Op, int], int]:
  """({op: its stage}, the stage count) of a block's ops in program order, each with the engine
  that runs it (None: nothing of its own, e.g. a reduce ScalarE summed). A new stage starts where
  the engine changes, so a stage's ops wait only on earlier stages; more stages than `banks`
  (blocks in flight) are merged evenly."""
  stage, engine, stages = 0, None, {}
  for op, on in engines:
    if on is not None and engine is not None and on != engine:
      stage += 1
    engine = on or engine
    stages[op] = stage
  count = stage + 1
  if count > banks:
    stages = {op: s * banks // count for op, s in stages.items()}
    count = banks
  return stages, count


def run_pipelined(blocks: list, stage_count: int, start, youngest_first: bool = False) -> None:
  """Emits `blocks` software-pipelined: `start(block)` returns a generator that emits one stage
  of that block per step; slot t emits stage k of block t − k for every k, the oldest block first
  (`youngest_first`: the newest first, so an engine starts block t's first stage before block
  t − 1's last). So each engine's in-order stream interleaves the stages of up to `stage_count`
  blocks, and an engine works on one block while the other finishes an earlier one (the blocks'
  tiles are in distinct banks: `stage_count` ≤ the banks)."""
  live = {}
  for t in range(len(blocks) + stage_count - 1):
    for k in (range(stage_count) if youngest_first else reversed(range(stage_count))):
      n = t - k
      if not 0 <= n < len(blocks):
        continue
      if k == 0:
        live[n] = start(blocks[n])
      next(live[n])
      if k == stage_count - 1:
        del live[n]
