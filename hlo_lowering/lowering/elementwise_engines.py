"""Which engine runs each op of an elementwise tile loop (elementwise.py), VectorE or ScalarE.

An elementwise chain (an optimizer update, a bias-and-scale epilogue) is VectorE-bound when every
op runs there, though the tile loop is memory-bound on paper. The ops with a bit-identical
ScalarE form (row_engines.py's module docstring: x · s, x + s, x − s, s − x for an immediate or
per-partition s, and x · x) are shared between the two engines instead, with the same greedy
balance of estimated per-tile time that row fusion uses (`row_engines.choose_scalar_steps`).
ScalarE skips an immediate bias of +0 (so that −0 passes through, as sqrt(−0) needs), where
VectorE's x + 0 turns −0 into +0: x + 0 on ScalarE therefore adds a [P, 1] tile of zeros
(GpSimd's iota writes it), which ScalarE does add.
The choice depends on the tile (its free size, which operands it reads per partition); it is
made once per tile loop, at the loop's tile size, so every tile runs the same instructions (a
loop body repeats them). `schedule` also
orders a tile's ops and cuts them into the stages of a software pipeline over the tiles, one per
change of engine along the ops' chains, so the two engines' in-order streams do not wait on each
other: each works on its own tile (stage_buffers.py gives each value the buffers that takes).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from hlo_lowering.ir import Op, Value
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.row_engines import (EITHER, SCALAR, VECTOR, RowStep,
                                               choose_scalar_steps, has_scalar_form, scalar_pass,
                                               vector_cycles)
from hlo_lowering.program import Alu, DType, Scalar, TileAP


class TileOp(NamedTuple):
  """One op of a tile as the engine choice sees it: alu(srcs..., s) or alu(s, srcs...) when
  `reverse`; `s` an immediate, a value loaded as a [P, 1] tile, or None."""
  op: Op
  alu: Alu | None            # None: a convert (VectorE's tensor_copy)
  srcs: list[Value]          # the operands read as full tiles
  s: Scalar | Value | None
  reverse: bool


class TileSchedule(NamedTuple):
  scalar: set[Op]            # the ops ScalarE runs
  order: list[int]           # the ops' indices in emission order
  stage: dict[Op, int]       # each op's pipeline stage
  fused: dict[Op, TileOp]    # tensor_tensor op -> the tensor_scalar op it absorbs (`_fusions`)

  @property
  def stages(self) -> int:
    return max(self.stage.values(), default=0) + 1


def zero_bias(t: TileOp) -> bool:
  """Whether ScalarE's form of `t` adds an immediate +0, which ScalarE skips (so −0 stays −0,
  where VectorE's x + 0 gives +0): that form takes a [P, 1] tile of zeros as its bias instead."""
  s = t.s
  if not isinstance(s, Scalar) or t.alu not in (Alu.ADD, Alu.SUB) or s.value != 0:
    return False
  negated = t.alu == Alu.SUB and not t.reverse  # x − s = x + (−s)
  return (math.copysign(1.0, s.value) < 0) == negated


def _scalar_eligible(t: TileOp) -> bool:
  if t.alu is None or t.alu.arity != 2:
    return False
  if isinstance(t.s, Value) and t.alu == Alu.SUB and not t.reverse:
    return False  # row − s needs −s as a tile: one more instruction
  dtypes = [v.dtype for v in t.srcs + list(t.op.operands)] + [t.op.result.dtype]
  if isinstance(t.s, Scalar):
    dtypes.append(t.s.dtype)
  same = len(t.srcs) == 2 and t.srcs[0] is t.srcs[1]
  return has_scalar_form(t.alu, dtypes, len(t.srcs), same)


def _choose_scalar_ops(ctx: LoweringContext, ops: list[TileOp], free: int,
                       scalar_only: frozenset) -> set[Op]:
  """The ops of a tile of `free` elements per partition that run on ScalarE: the ALU functions in
  `scalar_only` (ScalarE's lookup tables) and the movable ops the balance sends there."""
  fast_modes = str(ctx.target_spec.get("core_version", "")) != "NeuronCore-v2"
  steps = []
  for t in ops:
    if t.alu is not None and t.alu.arity == 1 and t.alu in scalar_only:
      steps.append(RowStep(t.op, SCALAR, 0.0, t.op.result, None))
      continue
    two_byte = all(v.dtype.itemsize == 2 for v in t.srcs + [t.op.result])
    kind = ("copy" if t.alu is None else "tensor_scalar" if t.s is not None
            else "unary" if t.alu.arity == 1 else "tensor_tensor" if t.alu.arity == 2
            else "ternary")
    cycles = vector_cycles(kind, t.alu, free, two_byte, fast_modes)
    steps.append(RowStep(t.op, EITHER if _scalar_eligible(t) else VECTOR, cycles, t.op.result,
                         None))
  scalar, _ = choose_scalar_steps(steps, free, ctx.target_spec)
  return scalar


def _fusions(forms: list[TileOp], shared: set[Value]) -> dict[Op, TileOp]:
  """{b: a} where fp32 b = alu(a, y) or alu(y, a) reads a = alu0(x, s) (s an immediate or a
  per-partition tile), which nothing else reads (`shared`: values stored or read twice): one
  scalar_tensor_tensor computes (x alu0 s) alu y with the intermediate in fp32, the bits of the
  two instructions, at a tensor_tensor's cost (NKI's scalar_tensor_tensor)."""
  producer = {t.op.result: t for t in forms}
  fused = {}
  for b in forms:
    if b.alu is None or b.alu.arity != 2 or b.s is not None or len(b.srcs) != 2:
      continue
    for v in b.srcs:
      a = producer.get(v)
      if (a is None or a.op in fused.values() or v in shared or a.alu is None
          or a.alu.arity != 2 or a.s is None or b.srcs[0] is b.srcs[1]):
        continue
      values = a.srcs + b.srcs + [a.op.result, b.op.result]
      if all(x.dtype == DType.F32 for x in values) and (
          not isinstance(a.s, Scalar) or a.s.dtype == DType.F32):
        fused[b.op] = a
        break
  return {b: a for b, a in fused.items() if b not in {x.op for x in fused.values()}}


def schedule(ctx: LoweringContext, ops: list[tuple[Op, list[Value], bool]],
             forms: list[TileOp], free: int, scalar_only: frozenset,
             shared: set[Value], fold: int = 1) -> TileSchedule:
  """The engines, order and stages of a tile's `ops` ((op, the values it reads as tiles, whether
  GpSimd computes it) in program order; `forms`: the others' TileOps; `shared`: the values
  stored or read by more than one op). A tensor_scalar op that a tensor_tensor alone reads is
  fused into it (`_fusions`); the rest is balanced between VectorE and ScalarE.

  Each op's level counts the engine changes on its longest chain of operands, so sorting by
  level (stable: program order within a level) groups each engine's ready work, and the ops of
  one level on different engines never read each other. Level l is stage l // `fold`: with
  `fold` 1 an engine's stage reads only earlier stages, and emitted youngest stage first
  (run_pipelined) each engine runs stage k of tile t − k while the other runs its own stages of
  other tiles; a larger `fold` keeps fewer tiles in flight (fewer buffers), and its stages wait
  on the other engine inside them."""
  fused = _fusions(forms, shared)
  absorbed = {a.op for a in fused.values()}
  scalar = _choose_scalar_ops(ctx, [t for t in forms if t.op not in absorbed], free, scalar_only)
  engine, producer, level = {}, {}, {}
  form_of = {t.op: t for t in forms}
  for op, tiled, on_gpsimd in ops:
    t = form_of.get(op)
    on_scalar = op in scalar or (t is not None and t.alu is not None and t.alu.arity == 1
                                 and t.alu in scalar_only)
    engine[op] = "gpsimd" if on_gpsimd else "scalar" if on_scalar else "vector"
    level[op] = max((level[p] + (engine[p] != engine[op]) for v in tiled
                     if (p := producer.get(v)) is not None), default=0)
    producer[op.result] = op
  order = sorted(range(len(ops)), key=lambda i: level[ops[i][0]])
  return TileSchedule(scalar, order, {op: level[op] // fold for op in level}, fused)


def emit_on_scalar(ctx: LoweringContext, t: TileOp, dst: TileAP, srcs: list[TileAP],
                   s: Scalar | TileAP | None, zero: TileAP | None) -> None:
  """ScalarE's form of a movable op (`_scalar_eligible`): `srcs` its full-tile operands, `s` its
  immediate or [P, 1] tile; `zero`: a [P, 1] tile of zeros when `zero_bias(t)`."""
  if zero is not None:
    s = zero
  negated = (Scalar(s.dtype, -s.value) if isinstance(s, Scalar) and t.alu == Alu.SUB
             and not t.reverse else zero)
  scalar_pass(ctx, t.alu, dst, srcs[0], s, t.reverse, negated, None)
