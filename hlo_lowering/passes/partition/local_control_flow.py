"""The partitioner's rules for control flow: while, and case / if.

A loop whose carried values are split runs on shards, each carried value under one sharding
for the whole loop (the layout is loop-invariant by construction: the body's results are
resharded to it before they are carried on).

Each carried value keeps the sharding it enters with (the most split it is held under; partial
sums are combined first); a whole one stays whole. The condition and the body are partitioned
like the program (their own local rules, reshards and collectives inside the region, run on
every trip), reading the carried values as those shards; the condition's predicate is whole
(every core takes the same branch). The loop's results are held under the carried shardings.

A case / if reading split values (its branches capture them) runs its branches on shards: the
first branch is partitioned as the program would be, each of its results held under the most
split sharding it has there (whole where it has none), and the other branches return their
results under the same shardings (resharded inside the branch). The branch index is whole.

A loop or case holding a manual computation (a pmap or shard_map under lax.map / scan / cond)
is partitioned so too even when it reads no split value: the manual computation must be
inlined wherever it is."""

from __future__ import annotations

from hlo_lowering.ir import Block, Op, Region, TensorType, Value, walk_ops
from hlo_lowering.passes.partition.sharding import Sharding


def _carried_sharding(p, v: Value) -> Sharding | None:
  if not p.is_sharded(v):
    return None
  s = p.shardings(v)[0]
  held = [t for t in p.local_of.get(v, {}) if not t.is_replicated]
  if held:  # a shard already held beats partial sums needing an all_reduce first
    s = max(held, key=p.shard_count)
  return None if s.is_replicated else s


def _local_type(p, v: Value, s: Sharding | None) -> TensorType:
  if s is None:
    return v.type
  return TensorType(s.local_shape(v.shape, p.mesh(s, "while"), str(v.type)), v.dtype)


def _region(p, block: Block, arg_shardings, result_shardings, what: str) -> Block:
  """`block` partitioned with its arguments held under `arg_shardings` (None: whole) and its
  results returned under `result_shardings`."""
  inner = p.nested()
  args = []
  for arg, s in zip(block.args, arg_shardings):
    local = arg if s is None else Value(_local_type(p, arg, s))
    if s is not None:
      inner.local_of[arg] = {s: local}
    args.append(local)
  inner.partition_ops(block.ops[:-1])
  return _finish(inner, block, result_shardings, what, args)


def _finish(inner, block: Block, result_shardings, what: str, args=()) -> Block:
  """The partitioned region of `block`, whose ops `inner` has partitioned: its results returned
  under `result_shardings` (None: whole)."""
  ret = block.ops[-1]
  ret.operands = [inner.whole(v, ret.loc) if s is None else inner.under(v, s, ret.loc, what)
                  for v, s in zip(ret.operands, result_shardings)]
  return Block(list(args), inner.ops + [ret])


def _holds_manual_computation(op: Op) -> bool:
  return any(o.name == "sdy.manual_computation" for region in op.regions
             for o in walk_ops(region.block))


def while_(p, op: Op) -> bool:
  if op.name != "stablehlo.while" or not (any(map(p.is_sharded, op.operands)) or
                                          _holds_manual_computation(op)):
    return False
  what = op.describe()
  shardings = [_carried_sharding(p, v) for v in op.operands]
  operands = [p.whole(v, op.loc) if s is None else p.under(v, s, op.loc, what)
              for v, s in zip(op.operands, shardings)]
  cond, body = (r.block for r in op.regions)
  regions = [Region(_region(p, cond, shardings, [None], what)),
             Region(_region(p, body, shardings, shardings, what))]
  local = Op(op.name, operands, [_local_type(p, r, s) for r, s in zip(op.results, shardings)],
             dict(op.attrs), regions, op.loc)
  _hold(p, op, local, shardings)
  return True


def _hold(p, op: Op, local: Op, shardings) -> None:
  """`local` (the partitioned `op`) added; `op`'s results held as its results."""
  p.ops.append(local)
  for result, value, s in zip(op.results, local.results, shardings):
    if s is None:
      p.global_of[result] = value
    else:
      p.local_of.setdefault(result, {})[s] = value


def _reads_split(p, op: Op) -> bool:
  """Whether a value defined outside `op`'s regions that they read is held split."""
  inside = {r for region in op.regions for o in walk_ops(region.block) for r in o.results}
  return any(p.is_sharded(v) for region in op.regions for o in walk_ops(region.block)
             for v in o.operands if v not in inside)


def case(p, op: Op) -> bool:
  if op.name not in ("stablehlo.case", "stablehlo.if") or not (_reads_split(p, op) or
                                                                 _holds_manual_computation(op)):
    return False
  what = op.describe()
  first, *others = (r.block for r in op.regions)
  inner = p.nested()
  inner.partition_ops(first.ops[:-1])
  shardings = [_carried_sharding(inner, v) for v in first.ops[-1].operands]
  regions = [Region(_finish(inner, first, shardings, what))]
  regions += [Region(_region(p, block, [], shardings, what)) for block in others]
  local = Op(op.name, [p.whole(v, op.loc) for v in op.operands],
             [_local_type(p, r, s) for r, s in zip(op.results, shardings)], dict(op.attrs),
             regions, op.loc)
  _hold(p, op, local, shardings)
  return True


RULES = {"stablehlo.while": while_, "stablehlo.case": case, "stablehlo.if": case}
