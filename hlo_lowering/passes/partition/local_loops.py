"""The partitioner's while rule: a loop whose carried values are split runs on shards, each
carried value under one sharding for the whole loop (the layout is loop-invariant by
construction: the body's results are resharded to it before they are carried on).

Each carried value keeps the sharding it enters with (the most split it is held under; partial
sums are combined first); a whole one stays whole. The condition and the body are partitioned
like the program (their own local rules, reshards and collectives inside the region, run on
every trip), reading the carried values as those shards; the condition's predicate is whole
(every core takes the same branch). The loop's results are held under the carried shardings."""

from __future__ import annotations

from hlo_lowering.ir import Block, Op, Region, TensorType, Value
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
  ret = block.ops[-1]
  ret.operands = [inner.whole(v, ret.loc) if s is None else inner.under(v, s, ret.loc, what)
                  for v, s in zip(ret.operands, result_shardings)]
  return Block(args, inner.ops + [ret])


def while_(p, op: Op) -> bool:
  if op.name != "stablehlo.while" or not any(map(p.is_sharded, op.operands)):
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
  p.ops.append(local)
  for result, value, s in zip(op.results, local.results, shardings):
    if s is None:
      p.global_of[result] = value
    else:
      p.local_of.setdefault(result, {})[s] = value
  return True


RULES = {"stablehlo.while": while_}
