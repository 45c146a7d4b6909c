"""The partitioner's dot_general rule: a local dot_general on shards, chosen from the shardings
its operands are held under (docs/multi-device.md "Partitioning").

Each mesh axis splitting an operand dim is given to one dim class of the dot: a batch dim (both
operands split alike, the result split there), a free dim (the result split there), a
contracting dim (both operands split alike; each core's dot is a partial sum over that axis's
cores, summed by an all_reduce, or a reduce_scatter when the reader wants it split) or none (the
operand is gathered along it). An operand not yet split along a dim its class needs is sliced
locally. Of all assignments, the one dividing the matmul's FLOPs the most wins, then the one
moving the fewest bytes (the operands' resharding plus, for partial sums, their all_reduce):
Megatron's column then row parallel MLP needs one all_reduce, FSDP's gathers its weights and
reduce_scatters its weight gradients."""

from __future__ import annotations

import itertools
import math

from hlo_lowering.ir import Op, TensorType
from hlo_lowering.passes.partition.local_values import LocalValues, Partial, add_body
from hlo_lowering.passes.partition.sharding import Sharding
from hlo_lowering.program import DType


def _slots(rank: int, batch: list[int], contracting: list[int], free: str) -> list[tuple]:
  """The dim class of each operand dim: ("b", i), ("c", i) or (free, dim)."""
  slots = []
  for d in range(rank):
    if d in batch:
      slots.append(("b", batch.index(d)))
    elif d in contracting:
      slots.append(("c", contracting.index(d)))
    else:
      slots.append((free, d))
  return slots


def dot_general(lv: LocalValues, op: Op) -> bool:
  if op.name != "stablehlo.dot_general":
    return False
  lhs, rhs = op.operands
  if not (lv.is_sharded(lhs) or lv.is_sharded(rhs)):
    return False
  dn = op.attrs["dot_dimension_numbers"]
  slots = (_slots(lhs.type.rank, dn["lhs_batching_dimensions"], dn["lhs_contracting_dimensions"], "lf"),
           _slots(rhs.type.rank, dn["rhs_batching_dimensions"], dn["rhs_contracting_dimensions"], "rf"))
  held = [lv.shardings(v) if lv.is_sharded(v) else [] for v in (lhs, rhs)]
  meshes = {s.mesh_name for h in held for s in h}
  if len(meshes) != 1:
    return False
  mesh_name, = meshes
  mesh = lv.mesh(Sharding(mesh_name, ()), op.describe())
  # Each axis's options, in the order axes are first seen in each class.
  seen: dict[str, list[tuple]] = {}
  order: list[tuple[tuple, str]] = []
  for operand_slots, shardings in zip(slots, held):
    for s in shardings:
      for d, axes in enumerate(s.dims):
        for axis in axes:
          if (operand_slots[d], axis) not in order:
            order.append((operand_slots[d], axis))
            seen.setdefault(axis, []).append(operand_slots[d])
  axes = [a for a in seen if mesh.axis_size(a) > 1]
  best = None
  for choice in itertools.product(*[seen[a] + [None] for a in axes]):
    assigned = dict(zip(axes, choice))
    plan = _plan(lv, op, slots, order, assigned, mesh_name)
    if plan is not None and (best is None or plan[0] < best[0]):
      best = plan
  if best is None:
    return False
  _, shardings, result, partial_axes = best
  locals_ = [lv.under(v, s, op.loc, op.describe()) for v, s in zip((lhs, rhs), shardings)]
  local_type = TensorType(result.local_shape(op.result.shape, mesh, op.describe()), op.result.dtype)
  local = lv.emit(op.name, locals_, local_type, op.loc, **op.attrs)
  if partial_axes:
    lv.partial_of[op.result] = Partial(result, partial_axes, local, add_body(op.result.dtype), "add")
  else:
    lv.local_of.setdefault(op.result, {})[result] = local
  return True


def _plan(lv: LocalValues, op: Op, slots, order, assigned: dict, mesh_name: str):
  """((−FLOP division, bytes), operand shardings, result sharding, partial axes) for one
  assignment of axes to dim classes; None when it divides nothing or a shape unevenly."""
  used = [a for a, slot in assigned.items() if slot is not None]
  if not used:
    return None
  by_slot: dict[tuple, tuple[str, ...]] = {}
  for slot, axis in order:
    if assigned.get(axis) == slot and axis not in by_slot.get(slot, ()):
      by_slot[slot] = by_slot.get(slot, ()) + (axis,)
  lhs, rhs = op.operands
  shardings = [Sharding(mesh_name, tuple(by_slot.get(slot, ()) for slot in operand_slots))
               for operand_slots in slots]
  if not all(lv.divides(v.shape, s) for v, s in zip((lhs, rhs), shardings)):
    return None
  lhs_slots, rhs_slots = slots
  result_slots = (sorted(s for s in lhs_slots if s[0] == "b") +
                  [s for s in lhs_slots if s[0] == "lf"] + [s for s in rhs_slots if s[0] == "rf"])
  result = Sharding(mesh_name, tuple(by_slot.get(slot, ()) for slot in result_slots))
  partial_axes = tuple(a for slot, axes in sorted(by_slot.items()) if slot[0] == "c" for a in axes)
  if partial_axes and op.result.dtype == DType.PRED:
    return None
  mesh = lv.mesh(result, op.describe())
  division = math.prod(mesh.axis_size(a) for a in used)
  moved = sum(lv.cost(v, s) for v, s in zip((lhs, rhs), shardings))
  if partial_axes:
    k = math.prod(mesh.axis_size(a) for a in partial_axes)
    moved += 2 * lv.local_bytes(op.result.type, result) * (k - 1) / k
  return (-division, moved), shardings, result, partial_axes
