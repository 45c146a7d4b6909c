"""The partitioner's rules for gather and scatter.

A gather runs on shards when its indices are split only along
their batch dims (each core looks up its own rows: an embedding lookup of a batch-split token
array) and its operand only along dims it takes whole (passthrough dims: slice size the full
dim, not collapsed, not indexed); the result is split along the matching batch and offset
dims. The looked-up rows are the same on every core, so each shard is exact. An operand split
along an indexed dim is read whole (gathered once); a gather over batched operands
(operand_batching_dims) runs replicated on whole operands.

A scatter into a splat of its combiner's identity (zeros for scatter-add: the gradient of a
lookup) whose indices and updates are split alike along their scatter (batch) dims scatters
each core's updates: the per-core results are partial sums (partial maxima, ...) whose fold
over the split axes is the scatter, combined by whoever reads them (an all_reduce, or a
reduce_scatter into a split reader). Other scatters run replicated."""

from __future__ import annotations

from hlo_lowering.ir import Op, Region, TensorType, Value, clone_block
from hlo_lowering.lowering.gpsimd.reduce import REDUCERS, identity
from hlo_lowering.passes.canonicalize import reducer_of
from hlo_lowering.passes.partition.local_values import LocalValues, Partial, splat_scalar
from hlo_lowering.passes.partition.sharding import Sharding


def _first(lv: LocalValues, v, allowed) -> Sharding | None:
  """The most split sharding `v` is held under whose split dims are all `allowed`."""
  for s in lv.shardings(v) if lv.is_sharded(v) else ():
    if all(d in allowed for d, axes in enumerate(s.dims) if axes):
      return s
  return None


def gather(lv: LocalValues, op: Op) -> bool:
  operand, indices = op.operands
  dn = op.attrs["dimension_numbers"]
  if dn["operand_batching_dims"] or not (lv.is_sharded(operand) or lv.is_sharded(indices)):
    return False
  sizes = list(op.attrs["slice_sizes"])
  collapsed, indexed = set(dn["collapsed_slice_dims"]), set(dn["start_index_map"])
  passthrough = {d for d, n in enumerate(operand.shape)
                 if sizes[d] == n and d not in collapsed and d not in indexed}
  index_vector = dn["index_vector_dim"]
  s_operand = _first(lv, operand, passthrough)
  s_indices = _first(lv, indices, set(range(indices.type.rank)) - {index_vector})
  split = [s for s in (s_operand, s_indices) if s is not None]
  if not split or len({s.mesh_name for s in split}) != 1:
    return False
  used = [a for s in split for axes in s.dims for a in axes]
  if len(used) != len(set(used)):
    return False  # one mesh axis splitting both: the shards would pair up wrongly
  rank = op.result.type.rank
  offset_dims = list(dn["offset_dims"])
  batch_dims = [j for j in range(rank) if j not in offset_dims]
  dims: list[tuple[str, ...]] = [() for _ in range(rank)]
  if s_indices is not None:
    index_batch = [d for d in range(indices.type.rank) if d != index_vector]
    for j, d in zip(batch_dims, index_batch):
      dims[j] = s_indices.dims[d]
  if s_operand is not None:
    window = [d for d in range(operand.type.rank) if d not in collapsed]
    for j, d in zip(offset_dims, window):
      dims[j] = s_operand.dims[d]
  t = Sharding(split[0].mesh_name, tuple(dims))
  if not lv.divides(op.result.shape, t):
    return False
  local_operand = (lv.under(operand, s_operand, op.loc, op.describe()) if s_operand
                   else lv.whole(operand, op.loc))
  local_indices = (lv.under(indices, s_indices, op.loc, op.describe()) if s_indices
                   else lv.whole(indices, op.loc))
  mesh = lv.mesh(t, op.describe())
  local_sizes = [n // (s_operand.shards(mesh, d) if s_operand else 1) for d, n in enumerate(sizes)]
  result_type = TensorType(t.local_shape(op.result.shape, mesh, op.describe()), op.result.dtype)
  lv.local_of.setdefault(op.result, {})[t] = lv.emit(
      op.name, [local_operand, local_indices], result_type, op.loc,
      **dict(op.attrs, slice_sizes=local_sizes))
  return True


def _batch_dims(rank: int, index_vector_dim: int) -> list[int]:
  return [d for d in range(rank) if d != index_vector_dim]


def scatter(lv: LocalValues, op: Op) -> bool:
  if len(op.operands) != 3 or len(op.results) != 1:
    return False
  operand, indices, updates = op.operands
  dn = op.attrs["scatter_dimension_numbers"]
  reducer = reducer_of(op)
  scalar = splat_scalar(lv.producers.get(operand))
  if isinstance(scalar, Value):  # a broadcast scalar: its constant's value
    scalar = splat_scalar(lv.producers.get(scalar))
  if dn["input_batching_dims"] or reducer not in REDUCERS or scalar is None or \
      isinstance(scalar, Value) or lv.is_sharded(operand) or \
      scalar != identity(reducer, operand.dtype):
    return False
  index_batch = _batch_dims(indices.type.rank, dn["index_vector_dim"])
  update_scatter = [d for d in range(updates.type.rank) if d not in dn["update_window_dims"]]
  # The one sharding of each that pairs index batch dim i with update scatter dim i.
  for v, own, other, other_rank in ((indices, index_batch, update_scatter, updates.type.rank),
                                    (updates, update_scatter, index_batch, indices.type.rank)):
    s = _first(lv, v, set(own))
    if s is None:
      continue
    paired = [() for _ in range(other_rank)]
    for a, b in zip(own, other):
      paired[b] = s.dims[a]
    paired = Sharding(s.mesh_name, tuple(paired))
    s_indices, s_updates = (s, paired) if v is indices else (paired, s)
    if not (lv.divides(indices.shape, s_indices) and lv.divides(updates.shape, s_updates)):
      return False
    axes = tuple(a for axes in s.dims for a in axes)
    local = lv.emit(op.name, [lv.whole(operand, op.loc),
                              lv.under(indices, s_indices, op.loc, op.describe()),
                              lv.under(updates, s_updates, op.loc, op.describe())],
                    op.result.type, op.loc, [Region(clone_block(op.regions[0].block, {}))],
                    **op.attrs)
    whole = Sharding(s.mesh_name, tuple(() for _ in operand.shape))
    lv.partial_of[op.result] = Partial(whole, axes, local, op.regions[0].block, reducer)
    return True
  return False


RULES = {"stablehlo.gather": gather, "stablehlo.scatter": scatter}
