"""fuse-elementwise: group producer→consumer clusters of elementwise ops into `trn.fusion` ops.

A cluster is a set of elementwise ops over one iteration space (their common result shape) that
the native elementwise lowering handles (arithmetic, math, compare, select, clamp, convert...:
`lowering.elementwise.is_fusible`), grown greedily along producer→consumer edges, plus the
`broadcast_in_dim`s and splat constants that only feed it. Its lowering (lowering/fusion.py)
loads each operand tile once, runs every op on SBUF tiles and stores only the values used
outside, instead of one HBM round trip per op.

The fused op: `%r... = trn.fusion(%x...)` with one region whose block arguments stand for the
operands (values defined outside; the region uses nothing else), whose ops are the cluster's
ops in program order (their results keep their Values) and whose `stablehlo.return` lists the
values used outside the cluster, in order; `%r...` replace those values outside. The op's
location is that of the cluster's last op; `attrs["fused_ops"]` counts the ops in the region.

Rules: clusters never create a cycle (a value leaving the cluster and reaching it again through
other ops: merging is refused when a path from one part to the other runs outside both); ops with
several results, regions, side effects or a zero-size result are never members; a cluster has
at most MAX_TILE_VALUES values per tile step (loaded operands + op results, each needs an SBUF
tile) so one tile step's working set fits in SBUF; clusters of fewer than two compute ops are
left alone (a single op's lowering is the same). Regions of stablehlo.while/case/if are fused
the same way; other regions (reduce, sort, scatter bodies) are matched structurally by their
lowerings and stay untouched.

Requires: calls inlined, canonicalized (dead ops removed, constants folded), dots normalized.
Ensures: the above; every other op is unchanged; ops may be reordered only where a fusion's
users must follow it (a valid topological order; side-effecting ops keep their relative order).
Runs after: normalize-dot-general (before fuse-rows, the last before check-supported).
"""

from __future__ import annotations

from hlo_lowering.ir import Block, Module, Op, Region, Value, control_flow_blocks
from hlo_lowering.lowering.elementwise import is_fusible

FUSION = "trn.fusion"
MAX_TILE_VALUES = 48
_SIDE_EFFECTS = frozenset({"stablehlo.custom_call", "stablehlo.outfeed", "stablehlo.send",
                           "stablehlo.recv", "stablehlo.infeed"})


def is_compute(op: Op) -> bool:
  return (len(op.results) == 1 and not op.regions and op.result.type.size > 0
          and is_fusible(op))


def is_splat_constant(op: Op) -> bool:
  """A constant whose elements all hold one value."""
  if op.name != "stablehlo.constant":
    return False
  value = op.attrs["value"]
  return value.size == 1 or (value.size > 0 and all(s == 0 for s in value.strides))


def _uses(op: Op) -> list[Value]:
  """Operands of `op` and of the ops nested in its regions (values captured from outside)."""
  used = list(op.operands)
  for region in op.regions:
    for nested in region.block.ops:
      used.extend(_uses(nested))
  return used


class ClusterGraph:
  """The block's ops contracted into clusters, kept in a valid topological order."""

  def __init__(self, ops: list[Op], returned: list[Value]):
    self.ops = ops
    self.compute = [is_compute(op) for op in ops]  # asked per member at every merge attempt
    self.returned = set(returned)
    self.producer: dict[Value, int] = {r: i for i, op in enumerate(ops) for r in op.results}
    self.users: dict[Value, list[int]] = {}
    for i, op in enumerate(ops):
      for v in _uses(op):
        self.users.setdefault(v, []).append(i)
    self.cluster = list(range(len(ops)))          # op index -> cluster id
    self.members = {i: [i] for i in range(len(ops))}
    self.order: list[int | None] = list(range(len(ops)))  # cluster ids, topological; None: gone
    self.pos = {i: i for i in range(len(ops))}

  def preds(self, c: int) -> set[int]:
    found = {self.cluster[self.producer[v]] for m in self.members[c]
             for v in _uses(self.ops[m]) if v in self.producer}
    found.discard(c)
    return found

  def succs(self, c: int) -> set[int]:
    found = {self.cluster[u] for m in self.members[c] for r in self.ops[m].results
             for u in self.users.get(r, ())}
    found.discard(c)
    return found

  def try_merge(self, a: int, b: int) -> bool:
    """Merges cluster `a` into `b` (a before b) unless a path a → … → b runs outside both."""
    pa, pb = self.pos[a], self.pos[b]
    between, stack = set(), [a]
    while stack:  # descendants of a that lie before b
      for s in self.succs(stack.pop()):
        if s != b and self.pos[s] < pb and s not in between:
          between.add(s)
          stack.append(s)
    if between & self.preds(b):
      return False
    if any(self.ops[m].name in _SIDE_EFFECTS for c in between for m in self.members[c]):
      return False  # side-effecting ops keep their order
    # a's descendants move after the merged cluster, which takes b's place.
    window = self.order[pa + 1:pb]
    self.order[pa:pb + 1] = ([None] + [c for c in window if c not in between] + [b]
                             + [c for c in window if c in between])
    for i in range(pa + 1, pb + 1):
      if self.order[i] is not None:
        self.pos[self.order[i]] = i
    moved = self.members.pop(a)
    for m in moved:
      self.cluster[m] = b
    self.members[b] = sorted(self.members[b] + moved)
    del self.pos[a]
    return True

  def absorb(self, c: int, op_index: int) -> None:
    """Moves a broadcast/constant whose users are all in `c` into it (never makes a cycle)."""
    old = self.cluster[op_index]
    self.order[self.pos.pop(old)] = None
    del self.members[old]
    self.cluster[op_index] = c
    self.members[c] = sorted(self.members[c] + [op_index])


def _tile_values(graph: ClusterGraph, members: list[int]) -> int:
  """Tiles one tile step needs: the compute ops' results plus the operands they load."""
  compute = [graph.ops[m] for m in members if graph.compute[m]]
  produced = {op.result for op in compute}
  loaded = {v for op in compute for v in op.operands if v not in produced}
  return len(compute) + len(loaded)


def _cluster(graph: ClusterGraph) -> None:
  for i, op in enumerate(graph.ops):
    if not graph.compute[i]:
      continue
    for v in op.operands:
      j = graph.producer.get(v)
      if j is None or not graph.compute[j] or graph.ops[j].result.shape != op.result.shape:
        continue
      a, b = graph.cluster[j], graph.cluster[i]
      if a == b:
        continue
      if _tile_values(graph, graph.members[a] + graph.members[b]) > MAX_TILE_VALUES:
        continue
      graph.try_merge(a, b)


def _absorb_views(graph: ClusterGraph, c: int) -> None:
  shape = graph.ops[graph.members[c][-1]].results[0].shape
  changed = True
  while changed:
    changed = False
    inside = set(graph.members[c])
    for m in list(graph.members[c]):
      for v in graph.ops[m].operands:
        j = graph.producer.get(v)
        if j is None or j in inside:
          continue
        producer = graph.ops[j]
        if any(r in graph.returned or any(u not in inside for u in graph.users.get(r, ()))
               for r in producer.results):
          continue
        view = (producer.name == "stablehlo.broadcast_in_dim" and producer.result.shape == shape
                and graph.producer.get(producer.operands[0]) not in inside)
        if view or is_splat_constant(producer):
          graph.absorb(c, j)
          inside.add(j)
          changed = True


def fused_op(graph: ClusterGraph, members: list[int],
             name: str = FUSION) -> tuple[Op, dict[Value, Value]]:
  """The op `name` whose region holds `members` (see the module docstring), and the map from
  each escaping value to the op's result that replaces it outside."""
  ops = [graph.ops[m] for m in members]
  inside = set(members)
  defined = {r for op in ops for r in op.results}
  operands: list[Value] = []
  for op in ops:
    for v in op.operands:
      if v not in defined and v not in operands:
        operands.append(v)
  escaping = [r for op in ops for r in op.results
              if r in graph.returned or any(u not in inside for u in graph.users.get(r, ()))]
  args = [Value(v.type) for v in operands]
  to_arg = dict(zip(operands, args))
  for op in ops:
    op.operands = [to_arg.get(v, v) for v in op.operands]
  ret = Op("stablehlo.return", escaping, [], loc=ops[-1].loc)
  fused = Op(name, operands, [v.type for v in escaping],
             {"fused_ops": len(ops)}, [Region(Block(args, ops + [ret]))], ops[-1].loc)
  return fused, dict(zip(escaping, fused.results))


def _fuse_block(block: Block) -> None:
  body, terminator = block.ops[:-1], block.ops[-1:]
  graph = ClusterGraph(body, block.terminator.operands)
  _cluster(graph)
  fused_clusters = [c for c in graph.order if c is not None
                    and sum(graph.compute[m] for m in graph.members[c]) >= 2]
  for c in fused_clusters:
    _absorb_views(graph, c)
  fused_set = set(fused_clusters)
  new_ops, mapping = [], {}
  for c in graph.order:
    if c is None:
      continue
    if c in fused_set:
      fused, results = fused_op(graph, graph.members[c])
      new_ops.append(fused)
      mapping.update(results)
    else:
      (m,) = graph.members[c]
      new_ops.append(graph.ops[m])
  block.ops = new_ops + terminator
  if mapping:
    for op in block.ops:
      replace_uses(op, mapping)


def replace_uses(op: Op, mapping: dict[Value, Value]) -> None:
  """Replaces `mapping`'s values in `op`'s operands and in its regions, except inside fused ops
  (they carry `fused_ops`): there the cluster's own values stay, outside values are block
  arguments."""
  op.operands = [mapping.get(v, v) for v in op.operands]
  if "fused_ops" in op.attrs:
    return
  for region in op.regions:
    for nested in region.block.ops:
      replace_uses(nested, mapping)


def run(module: Module) -> None:
  for function in module.functions.values():
    for block in list(control_flow_blocks(function.body)):
      _fuse_block(block)

