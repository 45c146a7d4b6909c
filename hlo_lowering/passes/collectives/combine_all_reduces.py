"""combine-all-reduces: gradient bucketing. Independent small all_reduces over the same cores
with the same reduction become one variadic all_reduce, which lowers to one collective over a
packed buffer: one ring's latency (2 (n − 1) hops) instead of one per tensor. JAX emits one
all_reduce per leaf of a pmean'd gradient tree.

An all_reduce joins the bucket of its (core groups, reducer) when it is at most
MAX_COMBINED_BYTES and no operand depends on an earlier member's result. The combined op goes
after every op it does not feed (all its operands are among them), and every op that reads a
member's result, transitively, after it in their order: nothing those ops feed is a member, so
every use still follows its definition.

Requires: resolve-collective-groups (attrs["core_groups"]); canonicalize's reducer_of bodies.
Ensures: in main's body, no two all_reduces of one bucket key that could be combined remain.
Runs after: resolve-collective-groups.
"""

from __future__ import annotations

from hlo_lowering.ir import Module, Op, Region, walk_ops
from hlo_lowering.passes.canonicalize import reducer_of

# Per all_reduce: the size below which latency dominates. One ring step moves size / n bytes;
# at 368 B/ns (trn2 core DMA rate) and 1.5 µs per hop, a step's transfer equals its latency at
# ~550 KB, so messages up to a few MiB on a few cores are latency-bound (est.).
MAX_COMBINED_BYTES = 4 << 20
# A bucket's total, so one combined collective cannot hold back compute for long.
MAX_BUCKET_BYTES = 32 << 20


def _key(op: Op):
  if op.name != "stablehlo.all_reduce" or len(op.operands) != 1:
    return None
  reducer = reducer_of(op)
  if reducer is None or op.operands[0].type.nbytes > MAX_COMBINED_BYTES:
    return None
  return (reducer, tuple(map(tuple, op.attrs["core_groups"])))


def _combine(ops: list[Op], key) -> list[Op]:
  members: list[Op] = []
  downstream: set = set()  # values computed from a member's result
  moved: list[Op] = []     # ops reading them, in order, to go after the combined op
  kept: list[Op] = []
  size = 0
  for op in ops:
    reads = {v for inner in walk_ops_of(op) for v in inner.operands}
    if _key(op) == key and not reads & downstream and \
        size + op.operands[0].type.nbytes <= MAX_BUCKET_BYTES:
      members.append(op)
      size += op.operands[0].type.nbytes
      downstream.update(op.results)
      continue
    if reads & downstream:
      moved.append(op)
      downstream.update(op.results)
    else:
      kept.append(op)
  if len(members) < 2:
    return ops
  combined = Op("stablehlo.all_reduce", [m.operands[0] for m in members],
                [m.results[0].type for m in members], dict(members[0].attrs),
                [Region(members[0].regions[0].block)], members[-1].loc)
  mapping = {m.results[0]: r for m, r in zip(members, combined.results)}
  for op in moved:
    for inner in walk_ops_of(op):
      inner.operands = [mapping.get(v, v) for v in inner.operands]
  if kept and kept[-1].name == "func.return":  # the terminator stays last
    return kept[:-1] + [combined] + moved + kept[-1:]
  return kept + [combined] + moved


def walk_ops_of(op: Op):
  yield op
  for region in op.regions:
    yield from walk_ops(region.block)


def run(module: Module) -> None:
  body = module.main.body
  keys = []
  for op in body.ops:
    key = _key(op)
    if key is not None and key not in keys:
      keys.append(key)
  for key in keys:
    body.ops = _combine(body.ops, key)
