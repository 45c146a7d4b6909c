"""The partitioner's local rules for every op but dot_general (dot_general.py): each computes an
op's result shard from its operands' shards, or declines (the op then runs replicated on whole
operands). Each rule returns whether it gave the result a local value.

- elementwise ops run under one sharding of the result's shape, the one its operands reach with
  the fewest bytes moved (ties: the most split); a multiply or divide by a splat and a negate of
  a partial sum stay partial (linear);
- a one-operand reduce (add, max, min, mul, and, or, xor; init its identity) reduces the shard:
  the result is partial over the reduced dims' axes (summed by whoever reads it);
- transpose, reshape (when every sharded dim stays whole per shard), broadcast_in_dim, slice and
  dynamic_slice (untouched along their sharded dims), concatenate (not along a sharded dim)
  move the sharding with the dims; transpose and reshape carry partial sums too;
- sdy.sharding_constraint / sdy.reshard: the operand under the named sharding (as partial sums
  where it is unreduced).
"""

from __future__ import annotations

import numpy as np

from hlo_lowering.ir import Op, Region, TensorType, Value, clone_block
from hlo_lowering.lowering.gpsimd.reduce import REDUCERS, identity
from hlo_lowering.passes.canonicalize import reducer_of
from hlo_lowering.passes.partition.local_values import LocalValues, Partial
from hlo_lowering.passes.partition.propagation import ELEMENTWISE, SHARDING_OPS, reshape_sharding
from hlo_lowering.passes.partition.sharding import Sharding


def _local_type(lv: LocalValues, value: Value, s: Sharding) -> TensorType:
  return TensorType(s.local_shape(value.shape, lv.mesh(s, "local"), str(value.type)), value.dtype)


def _set_local(lv: LocalValues, op: Op, s: Sharding, operands: list[Value], **attrs) -> bool:
  lv.local_of.setdefault(op.result, {})[s] = lv.emit(
      op.name, operands, _local_type(lv, op.result, s), op.loc, **dict(op.attrs, **attrs))
  return True


def _only_partial(lv: LocalValues, v: Value) -> Partial | None:
  """`v`'s partial sums when nothing else of it is held yet."""
  if v in lv.partial_of and not lv.local_of.get(v) and v not in lv.global_of:
    return lv.partial_of[v]
  return None


def _set_partial(lv: LocalValues, op: Op, p: Partial, s: Sharding, operands: list[Value],
                 **attrs) -> bool:
  local = lv.emit(op.name, operands, _local_type(lv, op.result, s), op.loc, **dict(op.attrs, **attrs))
  lv.partial_of[op.result] = Partial(s, p.axes, local, p.reducer, p.reducer_name)
  return True


def cheapest(lv: LocalValues, values: list[Value], shape: tuple[int, ...],
             allowed=lambda s: True, wanted: Sharding | None = None) -> Sharding | None:
  """The sharding of `shape` that `values` reach with the fewest bytes moved (ties: the most
  split), among those they are held under and the one the result is `wanted` under."""
  held = [s for v in values for s in lv.shardings(v)] + ([wanted] if wanted else [])
  candidates = [s for s in dict.fromkeys(held)
                if len(s.dims) == len(shape) and lv.divides(shape, s) and allowed(s)]
  if not candidates:
    return None
  return min(candidates, key=lambda s: (sum(lv.cost(v, s) for v in values), -lv.shard_count(s)))


def elementwise(lv: LocalValues, op: Op) -> bool:
  """Operands of the result's shape under one sharding; scalars (clamp's bounds, select's
  predicate) whole."""
  if op.name not in ELEMENTWISE or len(op.results) != 1 or op.regions:
    return False
  shape = op.result.shape
  full = [v for v in op.operands if v.shape == shape]
  if any(v.shape not in (shape, ()) for v in op.operands) or not any(map(lv.is_sharded, full)):
    return False
  if len(full) == len(op.operands) and _linear_of_partial(lv, op):
    return True
  t = cheapest(lv, full, shape, wanted=lv.hints.get(op.result))
  if t is None:
    return False
  return _set_local(lv, op, t, [lv.under(v, t, op.loc, op.describe()) if v.shape == shape
                                else lv.whole(v, op.loc) for v in op.operands])


def _linear_of_partial(lv: LocalValues, op: Op) -> bool:
  """negate(p), p * c, c * p, p / c of partial sums p and a splat c are partial sums too."""
  partials = [(i, _only_partial(lv, v)) for i, v in enumerate(op.operands)]
  partials = [(i, p) for i, p in partials if p is not None]
  if len(partials) != 1 or partials[0][1].reducer_name != "add":
    return False
  (i, p), = partials
  others = [v for j, v in enumerate(op.operands) if j != i]
  linear = (op.name == "stablehlo.negate" or op.name == "stablehlo.multiply" or
            (op.name == "stablehlo.divide" and i == 0 and op.result.dtype.is_float))
  if not linear or not all(map(lv.is_splat, others)):
    return False
  operands = [p.value if j == i else lv.local_splat(v, p.sharding)
              for j, v in enumerate(op.operands)]
  return _set_partial(lv, op, p, p.sharding, operands)


def reduce(lv: LocalValues, op: Op) -> bool:
  if op.name != "stablehlo.reduce" or len(op.operands) != 2:
    return False
  reducer = reducer_of(op)
  operand, init = op.operands
  splat = lv.producers.get(init)
  if reducer not in REDUCERS or not lv.is_sharded(operand) or splat is None or \
      splat.name != "stablehlo.constant" or \
      np.asarray(splat.attrs["value"]).reshape(-1)[0] != identity(reducer, init.dtype):
    return False
  s = lv.shardings(operand)[0]
  local = lv.under(operand, s, op.loc, op.describe())
  dims = set(op.attrs["dimensions"])
  reduced_axes = tuple(a for d in sorted(dims) for a in s.dims[d])
  kept = Sharding(s.mesh_name, tuple(a for d, a in enumerate(s.dims) if d not in dims))
  shape = tuple(n for d, n in enumerate(local.shape) if d not in dims)
  result = lv.emit(op.name, [local, init], TensorType(shape, op.result.dtype), op.loc,
                   [Region(clone_block(op.regions[0].block, {}))], **op.attrs)
  if reduced_axes:
    lv.partial_of[op.result] = Partial(kept, reduced_axes, result, op.regions[0].block, reducer)
  else:
    lv.local_of.setdefault(op.result, {})[kept] = result
  return True


# --- ops that move data between dims ----------------------------------------------------------

def _moved(lv: LocalValues, op: Op, result_sharding) -> bool:
  """An op of one data operand whose result sharding follows from the operand's by
  `result_sharding(s) -> Sharding | None`: a local twin under the first sharding it maps, or a
  partial twin of partial sums (for transpose and reshape, which commute with summing)."""
  operand = op.operands[0]
  if not lv.is_sharded(operand):
    return False
  p = _only_partial(lv, operand)
  if p is not None and op.name in ("stablehlo.transpose", "stablehlo.reshape"):
    t = result_sharding(p.sharding)
    return t is not None and _set_partial(lv, op, p, t, [p.value])
  for s in lv.shardings(operand):
    t = result_sharding(s)
    if t is not None:
      return _set_local(lv, op, t, [lv.under(operand, s, op.loc, op.describe()), *op.operands[1:]])
  return False


def transpose(lv: LocalValues, op: Op) -> bool:
  perm = op.attrs["permutation"]
  return _moved(lv, op, lambda s: Sharding(s.mesh_name, tuple(s.dims[p] for p in perm)))


def reshape(lv: LocalValues, op: Op) -> bool:
  before, after = op.operands[0].shape, op.result.shape
  return _moved(lv, op, lambda s: reshape_sharding(lv, s, before, after))


def broadcast_in_dim(lv: LocalValues, op: Op) -> bool:
  mapped = op.attrs["broadcast_dimensions"]
  before, after = op.operands[0].shape, op.result.shape

  def result(s: Sharding) -> Sharding | None:
    dims = [() for _ in after]
    for i, axes in enumerate(s.dims):
      if axes and before[i] != after[mapped[i]]:
        return None
      dims[mapped[i]] = axes
    return Sharding(s.mesh_name, tuple(dims))
  return _moved(lv, op, result)


def _untouched(s: Sharding, full: list[bool]) -> Sharding | None:
  """`s` when every dim it splits is one the op keeps whole (`full[d]`)."""
  return s if all(full[d] or not axes for d, axes in enumerate(s.dims)) else None


def slice_(lv: LocalValues, op: Op) -> bool:
  shape = op.operands[0].shape
  starts, limits, strides = (op.attrs[k] for k in ("start_indices", "limit_indices", "strides"))
  full = [starts[d] == 0 and limits[d] == n and strides[d] == 1 for d, n in enumerate(shape)]
  operand = op.operands[0]
  for s in lv.shardings(operand) if lv.is_sharded(operand) else ():
    if _untouched(s, full) is not None and lv.divides(op.result.shape, s):
      local = lv.under(operand, s, op.loc, op.describe())
      limit = [l if not s.dims[d] else local.shape[d] for d, l in enumerate(limits)]
      return _set_local(lv, op, s, [local], limit_indices=limit)
  return False


def dynamic_slice(lv: LocalValues, op: Op) -> bool:
  operand, *starts = op.operands
  sizes = op.attrs["slice_sizes"]
  full = [sizes[d] == n for d, n in enumerate(operand.shape)]
  if any(map(lv.is_sharded, starts)) or not lv.is_sharded(operand):
    return False
  for s in lv.shardings(operand):
    if _untouched(s, full) is not None:
      local = lv.under(operand, s, op.loc, op.describe())
      # A slice as long as its dim always starts at 0 (starts are clamped).
      zero = lv.emit("stablehlo.constant", [], starts[0].type, op.loc,
                     value=np.zeros((), starts[0].dtype.numpy)) if starts else None
      local_starts = [zero if s.dims[d] else v for d, v in enumerate(starts)]
      return _set_local(lv, op, s, [local, *local_starts], slice_sizes=list(local.shape))
  return False


def concatenate(lv: LocalValues, op: Op) -> bool:
  dim = op.attrs["dimension"]
  if not any(map(lv.is_sharded, op.operands)):
    return False
  unsplit_dim = lambda s: not s.dims[dim] and all(lv.divides(v.shape, s) for v in op.operands)
  t = cheapest(lv, op.operands, op.result.shape, unsplit_dim)
  if t is None:
    return False
  return _set_local(lv, op, t, [lv.under(v, t, op.loc, op.describe()) for v in op.operands])


def sharding_constraint(lv: LocalValues, op: Op) -> bool:
  """The constrained value under its named sharding (sliced from the whole one when that is
  what the core holds: the ops after it then run on shards)."""
  if op.name not in SHARDING_OPS:
    return False
  operand = op.operands[0]
  t = Sharding.parse(op.attrs["sharding"], op.describe())
  if t.unreduced:
    lv.hold(op.result, t, lv.unreduced(operand, t, op.loc, op.describe()))
    return True
  if t.is_replicated:
    whole = lv.whole(operand, op.loc)
    lv.global_of[op.result] = whole
    lv.local_of.setdefault(op.result, {})[t] = whole
    return True
  lv.local_of.setdefault(op.result, {})[t] = lv.under(operand, t, op.loc, op.describe())
  if not lv.is_sharded(operand):
    lv.global_of[op.result] = lv.whole(operand, op.loc)
  return True


RULES = {**{name: elementwise for name in ELEMENTWISE},
         "stablehlo.reduce": reduce, "stablehlo.transpose": transpose,
         "stablehlo.reshape": reshape, "stablehlo.broadcast_in_dim": broadcast_in_dim,
         "stablehlo.slice": slice_, "stablehlo.dynamic_slice": dynamic_slice,
         "stablehlo.concatenate": concatenate,
         **{name: sharding_constraint for name in SHARDING_OPS}}
