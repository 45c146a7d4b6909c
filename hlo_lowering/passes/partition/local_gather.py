"""The partitioner's gather rule: a gather runs on shards when its indices are split only along
their batch dims (each core looks up its own rows: an embedding lookup of a batch-split token
array) and its operand only along dims it takes whole (passthrough dims: slice size the full
dim, not collapsed, not indexed); the result is split along the matching batch and offset
dims. The looked-up rows are the same on every core, so each shard is exact. An operand split
along an indexed dim is read whole (gathered once); a gather over batched operands
(operand_batching_dims) runs replicated on whole operands."""

from __future__ import annotations

from hlo_lowering.ir import Op, TensorType
from hlo_lowering.passes.partition.local_values import LocalValues
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


RULES = {"stablehlo.gather": gather}
