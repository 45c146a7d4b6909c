"""Concatenate operands computed in place: a matmul whose result reaches a concatenate only
through views (reshapes, transposes, broadcasts that add unit dims) writes it straight into its
slot of the concatenation, through the strides those views invert to.

The transformer block's backward is the case: dQ, dK and dV ([heads, t, d] each) are transposed
to [t, heads, d], merged to [t, heads · d] and concatenated into the [t, 3 · heads · d] gradient
of `x @ wqkv`. Copied, that is three head transposes and the concatenate: 4.2 MB moved four
times, about 64 µs at the end of the step at seq 2048. In place, the matmuls' output DMAs store
each [128, d] tile where the concatenation holds it, and the views and the concatenate move no
data. The same products land in the same elements, so the bits are unchanged.

`plan_concatenations` runs before codegen lowers any op (after the program outputs are planned).
For each top-level concatenate and each operand, it follows the operand back through views that
nothing else reads to a `STRIDED_WRITERS` op result that nothing else reads and that is no
program output. It places the concatenation's result once and records, for that producer result,
the place its slot is seen as through the inverted views (`LoweringContext.planned_places`:
`new_result` returns it) and, for the operand, its slot (`slots`): views.py then keeps the views
views (the concatenate reads its slot as it is), and the concatenate copies only the other
operands (dma_copies.concatenate_pieces).
"""

from __future__ import annotations

from hlo_lowering.ir import Op, Value
from hlo_lowering.lowering import matmul
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.places import Place

CONCATENATE = "stablehlo.concatenate"
# Ops whose rules write a result through any strides `ctx.new_result` hands them (their stores
# are DMAs of per-tile access patterns built from the result place's strides): TensorE's
# matmuls (not GpSimd's integer dot).
STRIDED_WRITERS = frozenset({matmul.DOT, "trn.matmul_pair"})
_VIEWS = frozenset({"stablehlo.reshape", "stablehlo.transpose", "stablehlo.broadcast_in_dim"})


def same_elements(a: Place | None, b: Place | None) -> bool:
  """Whether two places name the same elements in the same order (strides of unit dims aside)."""
  if a is None or b is None:
    return False
  return (a.tensor == b.tensor and a.offset == b.offset and a.shape == b.shape
          and a.dtype == b.dtype
          and all(sa == sb for n, sa, sb in zip(a.shape, a.strides, b.strides) if n != 1))


def _forward(place: Place, op: Op) -> Place | None:
  """`place` (of op's operand) as op's result views it."""
  if op.name == "stablehlo.transpose":
    return place.permuted(op.attrs["permutation"])
  if op.name == "stablehlo.broadcast_in_dim":
    return place.broadcast(op.result.shape, op.attrs["broadcast_dimensions"])
  return place.reshaped(op.result.shape)


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
  return back if back is not None and same_elements(_forward(back, op), place) else None


def _is_view(op: Op) -> bool:
  if op.name != "stablehlo.broadcast_in_dim":
    return op.name in _VIEWS
  dims = list(op.attrs["broadcast_dimensions"])
  return op.operands[0].type.size == op.result.type.size and dims == sorted(dims)


def _producer_place(ctx: LoweringContext, value: Value, slot: Place,
                    producers: dict[Value, Op]) -> tuple[Value, Place] | None:
  """(the strided writer's result, its place) that computes `value` in `slot`, or None."""
  place = slot
  while len(ctx.users(value)) == 1 and value in producers:
    op = producers[value]
    if op.name in STRIDED_WRITERS:
      if (ctx.output_planned(value) or value in ctx.planned_places
              or op.name == matmul.DOT and not matmul.accepts(op)):  # an integer dot: GpSimd's
        return None
      return value, place
    if not _is_view(op):
      return None
    place = _backward(place, op)
    if place is None:
      return None
    value = op.operands[0]
  return None


def plan_concatenations(ctx: LoweringContext, ops: list[Op]) -> None:
  """Plans the concatenates of `ops` (a function body, in order) whose operands can be written
  in place (the module docstring)."""
  producers = {result: op for op in ops for result in op.results}
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
        found.append((*planned, (operand, slot)))
    if not found:
      continue
    tensor = ctx.new_result(op.result).tensor
    ctx.planned_places[op.result] = ctx.place(op.result)
    for value, place, (operand, slot) in found:
      ctx.planned_places[value] = _in(place, tensor)
      ctx.slots[operand] = _in(slot, tensor)


def _in(place: Place, tensor: int) -> Place:
  return Place(tensor, place.offset, place.shape, place.strides, place.dtype)
