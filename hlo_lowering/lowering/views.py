"""Native lowerings that move no data: broadcast_in_dim, reshape, transpose and slice give their
result a view of the operand's memory (a stride-0 broadcast, a re-strided alias, permuted
strides, an offset corner with scaled strides).

Consumers read a view directly through access patterns (elementwise tiles load a broadcast with
a stride-0 DMA; the matmul loads a transposed operand row-major and transposes on TensorE).
A reshape is a view whenever its elements are evenly strided in the new shape, and copies the
operand once (`ctx.dense_place`, one DMA) otherwise. A transpose is a view when every consumer,
seen through the reshapes and transposes that stay views, is lowered by a rule declared with
`reads_views` (a dot_general, a reduce, a row fusion's matmul member); otherwise it is a real
copy (the GpSimd rule in gpsimd/data_movement.py), so consumers that want dense data get it as before.
A slice of unit steps is a view on the same condition (`jnp.split(x @ w, 3)`'s q, k and v read
by matmuls, a copy of each through HBM otherwise: 34 µs at the start of the transformer block at
seq 2048).
"""

from __future__ import annotations

from hlo_lowering.ir import Op, Value
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.places import Place, same_elements
from hlo_lowering.lowering.registry import first_rule, register_lowering

VIEW_OPS = ("stablehlo.reshape", "stablehlo.transpose", "stablehlo.slice")


def viewed(place: Place, op: Op) -> Place | None:
  """`place` as seen through the view op `op` (a VIEW_OPS op or a broadcast_in_dim; None: the
  op would have to copy)."""
  if op.name == "stablehlo.transpose":
    return place.permuted(op.attrs["permutation"])
  if op.name == "stablehlo.slice":
    return place.sliced(op.attrs["start_indices"], op.result.shape, op.attrs["strides"])
  if op.name == "stablehlo.broadcast_in_dim":
    return place.broadcast(op.result.shape, op.attrs["broadcast_dimensions"])
  return place.reshaped(op.result.shape)


def consumers_read_views(ctx: LoweringContext, value: Value, place: Place) -> bool:
  """Whether every consumer of `value`, placed at `place`, reads it through access patterns."""
  for user in ctx.users(value):
    if user.name == "stablehlo.concatenate" and same_elements(ctx.slots.get(value), place):
      continue  # computed in its slot (in_place.py): the concatenate moves nothing
    if user.name in VIEW_OPS:
      view = viewed(place, user)
      if view is None or not consumers_read_views(ctx, user.result, view):
        return False
      continue
    rule = first_rule(user, target_spec=ctx.target_spec)
    if rule is None or not rule.reads_view_of(user, value):
      return False  # func.return, an elementwise op, a GpSimd copy...
  return True


@register_lowering("stablehlo.broadcast_in_dim", kind="native")
def lower_broadcast_in_dim(ctx: LoweringContext, op: Op) -> None:
  operand = op.operands[0]
  ctx.set_place(op.result, ctx.place(operand).broadcast(op.result.shape,
                                                          op.attrs["broadcast_dimensions"]))
  if ctx.splat(operand) is not None:
    ctx.set_splat(op.result, ctx.splat(operand))


@register_lowering("stablehlo.reshape", kind="native")
def lower_reshape(ctx: LoweringContext, op: Op) -> None:
  operand = op.operands[0]
  place = ctx.place(operand)
  if ctx.splat(operand) is not None:
    # Every element is the same: any shape is a stride-0 view of the first one.
    ctx.set_splat(op.result, ctx.splat(operand))
    ctx.set_place(op.result, Place(place.tensor, place.offset, op.result.shape,
                                   (0,) * op.result.type.rank, place.dtype))
    return
  view = place.reshaped(op.result.shape)
  if view is None:
    view = ctx.dense_place(operand).reshaped(op.result.shape)
  ctx.set_place(op.result, view)


def transpose_is_view(ctx: LoweringContext, op: Op) -> bool:
  view = ctx.place(op.operands[0]).permuted(op.attrs["permutation"])
  # Its operand written in the transposed layout (in_place.py): the result is dense already.
  return (same_elements(view, ctx.planned_places.get(op.result))
          or consumers_read_views(ctx, op.result, view))


@register_lowering("stablehlo.transpose", kind="native", when_placed=transpose_is_view,
                   describe="every consumer reads strided views (a view, no data moves)")
def lower_transpose(ctx: LoweringContext, op: Op) -> None:
  operand = op.operands[0]
  ctx.set_place(op.result, ctx.place(operand).permuted(op.attrs["permutation"]))
  if ctx.splat(operand) is not None:
    ctx.set_splat(op.result, ctx.splat(operand))


def slice_is_view(ctx: LoweringContext, op: Op) -> bool:
  """Unit steps only: a stepped slice's consumers would load it one element per DMA run."""
  if any(step != 1 for step in op.attrs["strides"]):
    return False
  view = viewed(ctx.place(op.operands[0]), op)
  return consumers_read_views(ctx, op.result, view)


@register_lowering("stablehlo.slice", kind="native", when_placed=slice_is_view,
                   describe="unit steps, every consumer reads strided views (a view, no data "
                            "moves)")
def lower_slice(ctx: LoweringContext, op: Op) -> None:
  operand = op.operands[0]
  ctx.set_place(op.result, viewed(ctx.place(operand), op))
  if ctx.splat(operand) is not None:
    ctx.set_splat(op.result, ctx.splat(operand))
