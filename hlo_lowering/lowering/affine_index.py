"""Affine index values of an elementwise cluster: iota, and the integer arithmetic and compares on
it, computed on chip from each tile's coordinates instead of read from HBM.

An iota along dim d of the result shape is the view with stride 1 on d and 0 elsewhere: its
value at an element is that view's element offset. Sums, differences and negations of such
values and their products with a compile-time constant (signed integers, every value of the
result inside its dtype, so no wraparound) are again views: offset + Σ coordinate·stride. A
compare of two of them (or of one and a constant) is a predicate: their difference compared with
0, and a select between a tile and a splat on such a predicate is one GpSimd `affine_select`
(NKI's nisa.affine_select: a causal mask with no mask tensor). The tiling (tiling.py) gives every
view its offset and partition / free strides per tile as it does for HBM operands, so an
instruction's affine pattern is read off the tile and its base steps with a counted loop like an
HBM offset (tile_loops.py).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hlo_lowering.ir import Op, Value
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.places import Place
from hlo_lowering.program import Alu, DType

_NEGATED = {Alu.EQ: Alu.NE, Alu.NE: Alu.EQ, Alu.LT: Alu.GE, Alu.GE: Alu.LT, Alu.LE: Alu.GT,
            Alu.GT: Alu.LE}
_COMPARE = {"EQ": Alu.EQ, "NE": Alu.NE, "LT": Alu.LT, "LE": Alu.LE, "GT": Alu.GT, "GE": Alu.GE}
NO_TENSOR = -1  # an affine view's Place addresses no tensor: only its offsets and strides count


@dataclasses.dataclass(frozen=True)
class Affine:
  """`view`'s element offset is the value (of `view.dtype`); with `compare`, the value is the
  predicate `offset compare 0`."""
  view: Place
  compare: Alu | None = None

  def negated(self) -> "Affine":
    return Affine(self.view, _NEGATED[self.compare])


def _view(shape, offset: int, strides, dtype) -> Place:
  return Place(NO_TENSOR, int(offset), tuple(shape), tuple(int(s) for s in strides), dtype)


def _fits(view: Place) -> bool:
  """Every value of the view lies inside its (integer) dtype."""
  low = view.offset + sum(min(0, s * (n - 1)) for s, n in zip(view.strides, view.shape))
  high = view.offset + sum(max(0, s * (n - 1)) for s, n in zip(view.strides, view.shape))
  info = np.iinfo(view.dtype.numpy)
  return info.min <= low and high <= info.max


def _combine(a: Place, b: Place, scale_b: int) -> Place:
  return _view(a.shape, a.offset + scale_b * b.offset,
               [x + scale_b * y for x, y in zip(a.strides, b.strides)], a.dtype)


def _scaled(a: Place, factor: int) -> Place:
  return _view(a.shape, a.offset * factor, [s * factor for s in a.strides], a.dtype)


def _same(v: Value) -> Value:
  return v


def analyse(ctx: LoweringContext, ops: list[Op], canon=_same) -> dict[Value, Affine]:
  """The results of `ops` (one result shape, program order) that are affine index values.
  `canon` maps an operand to the value it stands for (a row fusion's aliases)."""
  affine: dict[Value, Affine] = {}

  def number(v: Value) -> Place | None:
    """`v` as an affine integer view: an affine result, or a constant (a view of stride 0)."""
    v = canon(v)
    if v in affine and affine[v].compare is None:
      return affine[v].view
    splat = ctx.splat(v)
    if splat is not None and v.dtype.is_signed_int:
      return _view(ops[-1].result.shape, int(splat), [0] * len(ops[-1].result.shape), v.dtype)
    return None

  for op in ops:
    result = _affine_result(ctx, op, number, affine, canon)
    # A predicate's difference must fit too: materialised, it is a tile of that dtype.
    if result is not None and _fits(result.view):
      affine[op.result] = result
  return affine


def _affine_result(ctx: LoweringContext, op: Op, number, affine, canon) -> Affine | None:
  shape, dtype = op.result.shape, op.result.dtype
  if op.name == "stablehlo.iota":
    if not dtype.is_signed_int:
      return None
    dim = op.attrs["iota_dimension"]
    return Affine(_view(shape, 0, [int(d == dim) for d in range(len(shape))], dtype))
  operands = [number(v) for v in op.operands]
  signed = all(v.dtype.is_signed_int for v in op.operands)
  if op.name in ("stablehlo.add", "stablehlo.subtract") and signed and None not in operands:
    return Affine(_combine(operands[0], operands[1], 1 if op.name == "stablehlo.add" else -1))
  if op.name == "stablehlo.negate" and signed and operands[0] is not None:
    return Affine(_scaled(operands[0], -1))
  if op.name == "stablehlo.multiply" and signed and None not in operands:
    constant = [p for p in operands if not any(p.strides)]
    if constant:
      other = operands[1] if constant[0] is operands[0] else operands[0]
      return Affine(_scaled(other, constant[0].offset))
  if op.name == "stablehlo.compare" and signed and None not in operands:
    if op.attrs.get("compare_type") in (None, "SIGNED"):
      return Affine(_combine(operands[0], operands[1], -1),
                    _COMPARE[op.attrs["comparison_direction"]])
  predicate = _predicate(affine, canon(op.operands[0])) if op.operands else None
  if op.name == "stablehlo.not" and predicate is not None and dtype == DType.PRED:
    return predicate.negated()
  if op.name == "stablehlo.select" and predicate is not None and not dtype.is_float:
    branches = [ctx.splat(v) for v in op.operands[1:]]
    if None not in branches:
      picked = (int(branches[0]), int(branches[1]))
      if picked == (1, 0):
        return predicate
      if picked == (0, 1):
        return predicate.negated()
  return None


def _predicate(affine: dict[Value, Affine], v: Value) -> Affine | None:
  found = affine.get(v)
  return found if found is not None and found.compare is not None else None


def affine_select(ctx: LoweringContext, op: Op, affine: dict[Value, Affine], canon=_same):
  """(predicate, index of the tile operand, fill immediate) when `op` is a select on an affine
  predicate between a tile and a splat, so one affine_select computes it; else None."""
  if op.name != "stablehlo.select" or op.result in affine:
    return None
  predicate = _predicate(affine, canon(op.operands[0]))
  if predicate is None:
    return None
  splats = [ctx.splat(v) is not None for v in op.operands[1:]]
  if splats == [False, True]:
    return predicate, 1, ctx.splat_scalar(op.operands[2])
  if splats == [True, False]:
    return predicate.negated(), 2, ctx.splat_scalar(op.operands[1])
  return None
