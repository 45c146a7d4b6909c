"""Shardings flowing backward, from where a value is wanted split to the ops producing it
(docs/multi-device.md "Propagation"): the partitioner otherwise flows shardings forward only, from
the arguments, so a program whose inputs are replicated and whose outputs (`out_shardings`,
`with_sharding_constraint`, `sdy.sharding_constraint`) are sharded would compute every value
whole and slice it at the end.

`operand_shardings(op, t)` is an op's sharding rule read backward, Shardy-style: the shardings
of its operands under which the op applied to their shards gives its result's shard under `t`
(an elementwise op's operands alike, a transpose's permuted, a broadcast's on the dims it maps,
a reshape's where its shards are the same contiguous blocks, a reduce's with the reduced dims
whole, a dot_general's on the batch and free dims the result's come from; an iota has no
operands: its shard is generated from the core's offset). `hints` runs it over a program from
its sharded uses back to its producers: a value is wanted under `t` only when every one of its
uses wants it under `t`, so following a hint never reshards a value that something else reads
whole or split another way (no hint, no conflict: the forward pass's fewest-bytes choice decides
there). `lv` is the partitioner's LocalValues (its meshes and divisibility; local_values.py
imports this module, so it is not imported here)."""

from __future__ import annotations

import math
from typing import Callable

from hlo_lowering.ir import Block, Op, Value, walk_ops
from hlo_lowering.passes.partition.sharding import Sharding

# Ops whose operands all have the result's shape (or are scalars) and apply element by element.
ELEMENTWISE = frozenset("stablehlo." + name for name in (
    "abs add and atan2 cbrt ceil clamp compare convert cosine divide exponential exponential_minus_one "
    "floor is_finite log log_plus_one logistic maximum minimum multiply negate not or popcnt "
    "power remainder round_nearest_afz round_nearest_even rsqrt select shift_left "
    "shift_right_arithmetic shift_right_logical sign sine sqrt subtract tan tanh xor").split())
SHARDING_OPS = frozenset({"sdy.sharding_constraint", "sdy.reshard"})


def replicated(mesh_name: str, rank: int) -> Sharding:
  return Sharding(mesh_name, tuple(() for _ in range(rank)))


def reshape_sharding(lv, s: Sharding, before: tuple[int, ...],
                     after: tuple[int, ...]) -> Sharding | None:
  """The sharding of the reshaped value whose shards are the reshape of the shards under `s`:
  each sharded dim must begin a result dim (the same number of row-major index combinations
  before both) that its shard count divides. Between two such dims both shapes hold the same
  elements, so each shard is the same contiguous block in both."""
  mesh = lv.mesh(s, "reshape")
  dims: list[tuple[str, ...]] = [() for _ in after]
  result_dim_at = {math.prod(after[:e]): e for e in range(len(after)) if after[e] != 1}
  for d, axes in enumerate(s.dims):
    k = s.shards(mesh, d)
    if k == 1:
      continue
    e = result_dim_at.get(math.prod(before[:d]))
    if e is None or after[e] % k:
      return None
    dims[e] = axes
  return Sharding(s.mesh_name, tuple(dims))


def operand_shardings(lv, op: Op, t: Sharding) -> list[Sharding] | None:
  """The shardings of `op`'s operands whose shards `op` maps to its result's shard under `t`
  (None where no rule gives them, or a shard would not divide evenly)."""
  if len(op.results) != 1 or len(t.dims) != op.result.type.rank or \
      not lv.divides(op.result.shape, t):
    return None
  rule = _BACKWARD.get(op.name) or (_elementwise if op.name in ELEMENTWISE else None)
  if rule is None or (op.regions and op.name != "stablehlo.reduce"):
    return None
  shardings = rule(lv, op, t)
  if shardings is None or not all(lv.divides(v.shape, s) for v, s in zip(op.operands, shardings)):
    return None
  return shardings


def _elementwise(lv, op: Op, t: Sharding):
  shape = op.result.shape
  if any(v.shape not in (shape, ()) for v in op.operands):
    return None
  return [t if v.shape == shape else replicated(t.mesh_name, 0) for v in op.operands]


def _transpose(lv, op: Op, t: Sharding):
  perm = op.attrs["permutation"]
  dims: list[tuple[str, ...]] = [() for _ in perm]
  for i, p in enumerate(perm):
    dims[p] = t.dims[i]
  return [Sharding(t.mesh_name, tuple(dims))]


def _broadcast_in_dim(lv, op: Op, t: Sharding):
  operand = op.operands[0]
  mapped = op.attrs["broadcast_dimensions"]
  return [Sharding(t.mesh_name, tuple(
      t.dims[mapped[i]] if n == op.result.shape[mapped[i]] else () for i, n in
      enumerate(operand.shape)))]


def _reshape(lv, op: Op, t: Sharding):
  before, after = op.operands[0].shape, op.result.shape
  s = reshape_sharding(lv, t, after, before)
  # The rule read forward must give `t` back (both ways the shards are the same blocks).
  if s is None or reshape_sharding(lv, s, before, after) != t:
    return None
  return [s]


def _reduce(lv, op: Op, t: Sharding):
  if len(op.operands) != 2:
    return None
  dims = set(op.attrs["dimensions"])
  kept = iter(t.dims)
  operand = tuple(() if d in dims else next(kept) for d in range(op.operands[0].type.rank))
  return [Sharding(t.mesh_name, operand), replicated(t.mesh_name, 0)]


def _dot_general(lv, op: Op, t: Sharding):
  """The result's dims are the batch dims, then lhs's free dims, then rhs's: each split lands on
  the operand dims it comes from (both operands' for a batch dim); contracting dims whole."""
  dn = op.attrs["dot_dimension_numbers"]
  lhs, rhs = op.operands
  batch = (dn["lhs_batching_dimensions"], dn["rhs_batching_dimensions"])
  contracting = (dn["lhs_contracting_dimensions"], dn["rhs_contracting_dimensions"])
  free = [[d for d in range(v.type.rank) if d not in batch[i] and d not in contracting[i]]
          for i, v in enumerate((lhs, rhs))]
  dims = [[() for _ in range(v.type.rank)] for v in (lhs, rhs)]
  result = iter(t.dims)
  for lhs_dim, rhs_dim in zip(*batch):
    dims[0][lhs_dim] = dims[1][rhs_dim] = next(result)
  for i in (0, 1):
    for d in free[i]:
      dims[i][d] = next(result)
  return [Sharding(t.mesh_name, tuple(d)) for d in dims]


_BACKWARD: dict[str, Callable] = {
    "stablehlo.transpose": _transpose, "stablehlo.broadcast_in_dim": _broadcast_in_dim,
    "stablehlo.reshape": _reshape, "stablehlo.reduce": _reduce,
    "stablehlo.iota": lambda lv, op, t: [], "stablehlo.dot_general": _dot_general,
}


def hints(lv, ops: list[Op],
          returned: list[tuple[Value, Sharding | None]]) -> dict[Value, Sharding]:
  """The sharding each value made by `ops` (one block's ops, in order, but its return) is wanted
  under by all of its uses; `returned` holds the return's operands with their result shardings
  (None: returned whole)."""
  uses: dict[Value, int] = {}
  for op in ops:
    for inner in walk_ops(Block([], [op])):
      for v in inner.operands:
        uses[v] = uses.get(v, 0) + 1
  votes: dict[Value, list[Sharding | None]] = {}
  for v, s in returned:
    uses[v] = uses.get(v, 0) + 1
    votes.setdefault(v, []).append(s)
  result: dict[Value, Sharding] = {}
  for op in reversed(ops):
    if op.name in SHARDING_OPS:
      t = Sharding.parse(op.attrs["sharding"], op.describe())
      votes.setdefault(op.operands[0], []).append(None if t.is_replicated or t.unreduced else t)
      continue
    t = _agreed(votes.get(op.results[0], []), uses.get(op.results[0], 0)) \
        if len(op.results) == 1 else None
    operands = operand_shardings(lv, op, t) if t is not None else None
    if operands is not None:
      result[op.result] = t
    for i, v in enumerate(op.operands):
      votes.setdefault(v, []).append(operands[i] if operands is not None else None)
    for inner in walk_ops(Block([], op.regions[0].block.ops)) if op.regions else ():
      for v in inner.operands:
        votes.setdefault(v, []).append(None)
  return result


def _agreed(votes: list[Sharding | None], uses: int) -> Sharding | None:
  """The one split sharding every use of a value wants it under, if they agree."""
  if not votes or len(votes) < uses or None in votes or len(set(votes)) != 1:
    return None
  return None if votes[0].is_replicated else votes[0]
