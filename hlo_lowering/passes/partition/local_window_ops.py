"""The partitioner's local rules for ops that read a neighbourhood or a whole line of each
element: each runs on shards along the dims it treats element by element, and declines (the op
runs replicated on whole operands) when a dim it reaches across is split.

- pad: split only along dims it does not pad;
- reduce_window: split only along dims whose window is one element (size, stride and
  dilations 1, no padding);
- convolution (no feature or batch groups): the input split along its batch dim gives the
  output split there; the kernel split along its output-feature dim gives the output split
  along its feature dim;
- sort: every operand under one sharding that leaves the sorted dim whole.

An operand split along one dim the op reaches across by one mesh axis is resplit along another
dim instead (one all_to_all, (k - 1)/k of the shard received, rather than gathering k - 1
shards and computing whole) where the fewest bytes say so: pad, reduce_window and sort then
still run on shards. Halo exchange (a split spatial dim whose windows cross shard edges, by
collective_permute) is not done."""

from __future__ import annotations

from hlo_lowering.ir import Op, Region, TensorType, clone_block
from hlo_lowering.passes.partition.local_ops import cheapest
from hlo_lowering.passes.partition.local_values import LocalValues
from hlo_lowering.passes.partition.sharding import Sharding


def _emit_local(lv: LocalValues, op: Op, operands, result_shardings) -> bool:
  """`op` on local operands, its results held under `result_shardings`."""
  types = [TensorType(s.local_shape(r.shape, lv.mesh(s, "local"), op.describe()), r.dtype)
           for r, s in zip(op.results, result_shardings)]
  local = Op(op.name, operands, types, dict(op.attrs),
             [Region(clone_block(r.block, {})) for r in op.regions], op.loc)
  lv.ops.append(local)
  for result, value, s in zip(op.results, local.results, result_shardings):
    lv.local_of.setdefault(result, {})[s] = value
  return True


def _split_dims(s: Sharding) -> set[int]:
  return {d for d, axes in enumerate(s.dims) if axes}


def _resplit(lv: LocalValues, values, allowed_dims: set[int], shapes) -> Sharding | None:
  """The first held sharding of `values` that splits one dim outside `allowed_dims` by one axis,
  with that axis moved to the largest allowed dim it divides in every one of `shapes` (the
  all_to_all LocalValues.reshard emits)."""
  for s in (s for v in values if lv.is_sharded(v) for s in lv.shardings(v)):
    outside = [d for d in _split_dims(s) if d not in allowed_dims]
    if len(outside) != 1 or len(s.dims[outside[0]]) != 1:
      continue
    d, = outside
    axis = s.dims[d][0]
    for e in sorted(allowed_dims, key=lambda e: -shapes[0][e]):
      dims = list(s.dims)
      dims[d], dims[e] = (), dims[e] + (axis,)
      t = Sharding(s.mesh_name, tuple(dims))
      if all(lv.divides(shape, t) for shape in shapes):
        return t
  return None


def pad(lv: LocalValues, op: Op) -> bool:
  operand, value = op.operands
  if not lv.is_sharded(operand):
    return False
  padded = {d for d in range(operand.type.rank) if op.attrs["edge_padding_low"][d] or
            op.attrs["edge_padding_high"][d] or op.attrs["interior_padding"][d]}
  shapes = [operand.shape, op.result.shape]
  t = cheapest(lv, [operand], operand.shape, lambda s: not _split_dims(s) & padded and
               all(lv.divides(shape, s) for shape in shapes),
               _resplit(lv, [operand], set(range(len(operand.shape))) - padded, shapes))
  if t is None:
    return False
  local = lv.under(operand, t, op.loc, op.describe())
  return _emit_local(lv, op, [local, lv.whole(value, op.loc)], [t])


def _pointwise_window_dims(op: Op, rank: int) -> set[int]:
  """The dims along which each window of a reduce_window is one element."""
  ones = lambda name: [1] * rank if op.attrs.get(name) is None else [int(v) for v in op.attrs[name]]
  padding = op.attrs.get("padding")
  pads = [(0, 0)] * rank if padding is None else [tuple(p) for p in padding]
  return {d for d, (size, stride, base, dilation, pad_) in enumerate(zip(
      ones("window_dimensions"), ones("window_strides"), ones("base_dilations"),
      ones("window_dilations"), pads)) if (size, stride, base, dilation) == (1, 1, 1, 1) and
      tuple(int(p) for p in pad_) == (0, 0)}


def reduce_window(lv: LocalValues, op: Op) -> bool:
  n = len(op.operands) // 2
  inputs, inits = op.operands[:n], op.operands[n:]
  if not any(map(lv.is_sharded, inputs)):
    return False
  pointwise = _pointwise_window_dims(op, inputs[0].type.rank)
  shapes = [inputs[0].shape] + [r.shape for r in op.results]
  t = cheapest(lv, inputs, inputs[0].shape, lambda s: _split_dims(s) <= pointwise and all(
      lv.divides(shape, s) for shape in shapes), _resplit(lv, inputs, pointwise, shapes))
  if t is None:
    return False
  operands = [lv.under(v, t, op.loc, op.describe()) for v in inputs]
  return _emit_local(lv, op, operands + [lv.whole(v, op.loc) for v in inits], [t] * n)


def convolution(lv: LocalValues, op: Op) -> bool:
  lhs, rhs = op.operands
  dn = op.attrs["dimension_numbers"]
  if int(op.attrs.get("feature_group_count", 1)) != 1 or \
      int(op.attrs.get("batch_group_count", 1)) != 1:
    return False
  rank = op.result.type.rank
  # (operand, the one dim it may be split on, the output dim that split becomes)
  for operand, dim, out_dim in ((lhs, dn["input_batch_dimension"], dn["output_batch_dimension"]),
                                (rhs, dn["kernel_output_feature_dimension"],
                                 dn["output_feature_dimension"])):
    held = lv.shardings(operand) if lv.is_sharded(operand) else []
    for s in held:
      if _split_dims(s) != {dim}:
        continue
      out = Sharding(s.mesh_name, tuple(s.dims[dim] if d == out_dim else () for d in range(rank)))
      if not lv.divides(op.result.shape, out):
        continue
      other = rhs if operand is lhs else lhs
      local = lv.under(operand, s, op.loc, op.describe())
      whole = lv.whole(other, op.loc)
      return _emit_local(lv, op, [local, whole] if operand is lhs else [whole, local], [out])
  return False


def sort(lv: LocalValues, op: Op) -> bool:
  if not any(map(lv.is_sharded, op.operands)):
    return False
  dim = op.attrs["dimension"] % op.operands[0].type.rank
  shape = op.operands[0].shape
  t = cheapest(lv, op.operands, shape, lambda s: not s.dims[dim],
               _resplit(lv, op.operands, set(range(len(shape))) - {dim}, [shape]))
  if t is None:
    return False
  operands = [lv.under(v, t, op.loc, op.describe()) for v in op.operands]
  return _emit_local(lv, op, operands, [t] * len(op.results))


RULES = {"stablehlo.pad": pad, "stablehlo.reduce_window": reduce_window,
         "stablehlo.convolution": convolution, "stablehlo.sort": sort}
