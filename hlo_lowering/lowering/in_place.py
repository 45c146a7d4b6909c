"""Matmul results written where a consumer wants them: a matmul whose result reaches a
concatenate, or a copying transpose, only through views (reshapes, transposes, broadcasts that
add unit dims) writes it straight into the concatenation's slot, or in the transposed layout,
through the strides those views invert to.

The transformer block is the case twice. Its backward merges dQ, dK and dV ([heads, t, d] each)
into [t, heads · d] and concatenates them into the gradient of `x @ wqkv`: copied, three head
transposes and the concatenate, 4.2 MB moved four times, about 64 µs at the end of the step at
seq 2048. Its forward merges attention's heads (`(p @ v).transpose(...).reshape(t, h · d)`)
before `@ wo`: the reshape of the transposed view has no strided form, so the transpose copied
4.2 MB (21 µs). In place, the matmuls' output DMAs store each [128, d] tile where the
concatenation (the transposed tensor) holds it, and the views, the transposes and the
concatenate move no data. The same products land in the same elements: the bits are unchanged.

`plan` runs before codegen lowers any op (after the program outputs are planned). For each
top-level concatenate and each operand, then for each top-level transpose that would copy (its
consumers do not all read the unplanned layout as a view), it follows the value back through
views that nothing else reads to a `STRIDED_WRITERS` op result that nothing else reads, that is
no program output, and whose place there keeps its innermost dim contiguous (so its stores move
runs of rows, not single elements). It places the concatenation's (the transpose's) result once
and records, for that producer result, the place its slot is seen as through the inverted views
(`LoweringContext.planned_places`: `new_result` returns it) and, for a concatenate operand, its
slot (`slots`). views.py then keeps the views views (the concatenate reads its slot as it is; a
transpose of the planned layout is its planned result), and the concatenate copies only its
other operands (dma_copies.concatenate_pieces).
"""
from __future__ import annotations

from hlo_lowering.ir import Op, Value
from hlo_lowering.lowering import matmul
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.places import Place, same_elements
from hlo_lowering.lowering.views import consumers_read_views, viewed

CONCATENATE = "stablehlo.concatenate"
TRANSPOSE = "stablehlo.transpose"
# Ops whose rules write a result through any strides `ctx.new_result` hands them (their stores
# are DMAs of per-tile access patterns built from the result place's strides): TensorE's
# matmuls (not GpSimd's integer dot).
STRIDED_WRITERS = frozenset({matmul.DOT, "trn.matmul_pair"})
_VIEWS = frozenset({"stablehlo.reshape", "stablehlo.transpose", "stablehlo.broadcast_in_dim"})


def _backward(place: Place, op: Op) -> Place | None:
  """The place of op's operand that op's result views as `place`, or None."""
  operand = op.operands[0]
  if op.name == "stablehlo.transpose":
    inverse = [0] * len(op.attrs["permutation"])
    for i, p in enumerate(op.attrs["permutation"]):
      inverse[p] = i
    back = place.permuted(inverse)
  else:  # a reshape, or a broadcast that only adds unit dims (the same elements, reshaped)
    back = place.reshaped(operand.shape)
  return back if back is not None and same_elements(viewed(back, op), place) else None


def _is_view(op: Op) -> bool:
  if op.name != "stablehlo.broadcast_in_dim":
    return op.name in _VIEWS
  dims = list(op.attrs["broadcast_dimensions"])
  return op.operands[0].type.size == op.result.type.size and dims == sorted(dims)


def _producer_place(ctx: LoweringContext, value: Value, slot: Place,
                    producers: dict[Value, Op]) -> tuple[Value, Place, list[Op]] | None:
  """(the strided writer's result, its place, the views from it to `value` in order) that
  computes `value` in `slot`, or None."""
  place, views = slot, []
  while len(ctx.users(value)) == 1 and value in producers:
    op = producers[value]
    if op.name in STRIDED_WRITERS:
      if (ctx.output_planned(value) or value in ctx.planned_places
              or op.name == matmul.DOT and not matmul.accepts(op)  # an integer dot: GpSimd's
              or not _rows_contiguous(place)):
        return None
      return value, place, views[::-1]
    if not _is_view(op):
      return None
    place = _backward(place, op)
    if place is None:
      return None
    views.append(op)
    value = op.operands[0]
  return None


def _rows_contiguous(place: Place) -> bool:
  """Whether a matmul writing `place` stores runs of its rows' elements: its innermost dim stays
  contiguous. A transpose that moves it ((A·B)ᵀ) would make every output DMA run one element
  long; copied, it moves long runs (or fold-transpose-into-dot has made it the dot's layout)."""
  return place.shape[-1] == 1 or place.strides[-1] == 1


def plan(ctx: LoweringContext, ops: list[Op]) -> None:
  """Plans the concatenates, then the transposes, of `ops` (a function body, in order) that
  a matmul can write in place (the module docstring)."""
  producers = {result: op for op in ops for result in op.results}
  _plan_concatenations(ctx, ops, producers)
  _plan_transposes(ctx, ops, producers)


def _plan_transposes(ctx: LoweringContext, ops: list[Op], producers: dict[Value, Op]) -> None:
  """A transpose that would copy (its consumers do not all read it as a view) of a matmul's
  result reached through views nothing else reads: the matmul writes the transposed layout."""
  for op in ops:
    if op.name != TRANSPOSE or op.result.type.size == 0 or op.result in ctx.planned_places:
      continue
    dense = Place.dense(-1, op.result.shape, op.result.dtype)
    inner = _backward(dense, op)
    planned = None if inner is None else _producer_place(ctx, op.operands[0], inner, producers)
    if planned is None:
      continue
    value, place, views = planned
    unplanned = Place.dense(-1, value.shape, value.dtype)
    for view in views + [op]:
      unplanned = unplanned and viewed(unplanned, view)
    if unplanned is not None and consumers_read_views(ctx, op.result, unplanned):
      continue  # a view as it is: the matmul's dense stores are cheaper
    tensor = ctx.new_result(op.result).tensor
    ctx.planned_places[op.result] = ctx.place(op.result)
    ctx.planned_places[value] = _in(place, tensor)


def _plan_concatenations(ctx: LoweringContext, ops: list[Op],
                         producers: dict[Value, Op]) -> None:
  """Each concatenate operand a matmul computes through views nothing else reads: the matmul
  writes it into its slot."""
  for op in ops:
    if op.name != CONCATENATE or op.result.type.size == 0:
      continue
    axis, start, found = op.attrs["dimension"], 0, []
    out = Place.dense(-1, op.result.shape, op.result.dtype)  # the slots' strides, tensor later
    for operand in op.operands:
      starts = [0] * op.result.type.rank
      starts[axis] = start
      start += operand.shape[axis]
      slot = out.sliced(starts, operand.shape, [1] * len(starts))
      planned = _producer_place(ctx, operand, slot, producers) if operand.type.size else None
      if planned is not None and all(planned[0] is not v for v, _, _ in found):
        found.append((planned[0], planned[1], (operand, slot)))
    if not found:
      continue
    tensor = ctx.new_result(op.result).tensor
    ctx.planned_places[op.result] = ctx.place(op.result)
    for value, place, (operand, slot) in found:
      ctx.planned_places[value] = _in(place, tensor)
      ctx.slots[operand] = _in(slot, tensor)


def _in(place: Place, tensor: int) -> Place:
  return Place(tensor, place.offset, place.shape, place.strides, place.dtype)
