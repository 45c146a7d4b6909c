"""fuse-rows: group a row reduction with the elementwise ops around it into one `trn.row_fusion`.

Softmax, layernorm and RMSnorm are row reductions (a reduce over the last, contiguous dims, with
add, max or min) whose operand is computed elementwise from the rows and whose result, broadcast
back over each row, feeds further elementwise ops over the same rows. Lowered op by op, every
intermediate crosses HBM and each [rows, 1] statistic is read back broadcast over its row. A
row fusion's lowering (lowering/row_fusion.py) instead loads a block of ≤ 128 whole rows once,
computes the statistics in SBUF ([P, 1] tiles), applies the consumers with the statistic as a
per-partition scalar, and stores only the values used outside.

The row space of a reduce over the last k dims of an operand of shape S (`row_fusion.RowSpace`):
row values have shape S; statistics are values with one element per row, of any shape with
prod(S[:-k]) elements (the reduce's S[:-k], keepdims S[:-k] + [1] * k, a reshape of either), row
r being element r in row-major order. Members, grown from each reduce along producer→consumer
edges:
- reduces of a row value over the same k last dims (reducer add, max or min, one operand);
- elementwise ops (fuse-elementwise's compute ops) whose operands and result are all row values
  or all statistics, iotas over the rows (`row_affine.is_row_iota`: a causal mask's indices,
  computed on chip per block), and the trn.fusion clusters fuse-elementwise made of them (their
  results all row values or all statistics; every broadcast inside reads an outside value, or a
  statistic or row value as `RowSpace.stat_view` allows);
- reshapes and broadcast_in_dims from a statistic to a statistic or over the rows' reduced dims,
  element order kept (`RowSpace.stat_view`).
Other values are operands (loaded by the lowering; broadcast rows such as a layernorm's scale
are viewed with stride 0). Merging follows fuse-elementwise's rule (no cycles through outside
ops, side-effecting ops keep their order) and stops where the rows no longer fit SBUF
(`row_fusion.rows_fit`: whole rows of the row values a block holds at once, ≤ one SBUF slot per
row; `_row_values` counts them by their lifetimes in program order): then the ops stay as they
are and are lowered as before. A group needs a reduce and at least one
other compute member. A broadcast of a statistic over the rows read only outside the group
(where such a stop cut a softmax between its row sum and the divide) is not a member: it stays
after the fused op, which returns the statistic, so no row of one repeated value is stored.

The fused op is built as fuse-elementwise builds trn.fusion (`fuse_elementwise.fused_op`): one
region whose block arguments are the operands, the members in program order and a
`stablehlo.return` of the values used outside; `attrs` also record the row space
(`row_shape`, `reduced_dims`).

Requires: fuse-elementwise ran (its trn.fusion ops are members as a whole).
Ensures: the above; other ops unchanged; ops reordered only as fuse-elementwise may (and such
broadcasts moved after their group).
Runs after: fuse-elementwise.
"""

from __future__ import annotations

import math

from hlo_lowering.ir import Block, Module, Op, Value, control_flow_blocks
from hlo_lowering.lowering import reduce as reduce_lowering
from hlo_lowering.lowering.row_affine import is_row_iota
from hlo_lowering.lowering.row_fusion import RowSpace, rows_fit
from hlo_lowering.passes.fuse_elementwise import (FUSION, ClusterGraph, fused_op, is_compute,
                                                  is_splat_constant, replace_uses)

ROW_FUSION = "trn.row_fusion"
_VIEWS = frozenset({"stablehlo.broadcast_in_dim", "stablehlo.reshape"})


def row_space(op: Op) -> RowSpace | None:
  """The row space of a reduce this pass fuses around, or None."""
  if op.name != "stablehlo.reduce" or not reduce_lowering.accepts(op):
    return None
  shape = op.operands[0].shape
  dims = sorted(op.attrs["dimensions"])
  k = len(dims)
  if not 0 < k < len(shape) or dims != list(range(len(shape) - k, len(shape))):
    return None
  space = RowSpace(tuple(shape), k)
  return space if space.columns >= 2 and math.prod(space.kept) >= 1 else None


def _compute_member(op: Op, space: RowSpace) -> bool:
  if op.name == "stablehlo.iota":  # computed from each block's coordinates (row_affine.py)
    return is_row_iota(op, space.shape, space.reduced)
  shape = op.result.shape
  return ((shape == space.shape or space.is_stat(shape))
          and all(v.shape == shape for v in op.operands))


def _cluster_member(op: Op, space: RowSpace) -> bool:
  shapes = {r.shape for r in op.results}
  if not (shapes == {space.shape} or all(space.is_stat(s) for s in shapes)):
    return False
  for inner in op.regions[0].block.ops[:-1]:
    if inner.name == "stablehlo.constant":
      continue
    if inner.name == "stablehlo.broadcast_in_dim":
      source = inner.operands[0].shape
      if (source == space.shape or space.is_stat(source)) and not space.stat_view(inner):
        return False  # a row or statistic read some other way than per row
    elif not _compute_member(inner, space):
      return False
  return True


def is_member(op: Op, space: RowSpace) -> bool:
  """Whether `op` may join a row fusion of `space` (see the module docstring)."""
  if op.name == "stablehlo.reduce":
    return row_space(op) == space
  if op.name == FUSION:
    return _cluster_member(op, space)
  if op.name in _VIEWS:
    return space.stat_view(op)
  return is_compute(op) and _compute_member(op, space)


def holds_only_members(op: Op) -> bool:
  """Whether every op of a trn.row_fusion's region is a member of its row space (verifier)."""
  space = RowSpace(tuple(op.attrs["row_shape"]), int(op.attrs["reduced_dims"]))
  return all(is_member(inner, space) for inner in op.regions[0].block.ops[:-1])


def _row_values(graph: ClusterGraph, members: list[int], space: RowSpace) -> tuple[int, int]:
  """(The most row values a block of `members` holds in SBUF at once, their widest itemsize).

  The members run in program order (nested trn.fusion ops inline). A row value takes a tile
  from the op that makes it (a row read from outside, or broadcast from outside, from the
  block's start) to its last reader, or to the block's end when it is used outside; views of a
  row share its tile and splats take none. The lowering places tiles by the same lifetimes
  (row_fusion.py), its fused forms only dropping or sharing tiles, so this bounds its rows."""
  alias: dict[Value, Value] = {}
  splats: set[Value] = set()

  def canon(v: Value) -> Value:
    while v in alias:
      v = alias[v]
    return v

  def splat(v: Value) -> bool:
    op = graph.ops[graph.producer[v]] if v in graph.producer else None
    while op is not None and op.name in _VIEWS:
      v = op.operands[0]
      op = graph.ops[graph.producer[v]] if v in graph.producer else None
    return v in splats or (op is not None and is_splat_constant(op))

  sequence: list[Op] = []
  for m in sorted(members):
    op = graph.ops[m]
    if op.name != FUSION:
      sequence.append(op)
      continue
    block = op.regions[0].block
    alias.update(zip(block.args, op.operands))
    sequence.extend(block.ops[:-1])
    alias.update(zip(op.results, block.terminator.operands))
  inside = set(members)
  rows, start, end = set(), {}, {}
  for t, op in enumerate(sequence):
    if op.name == "stablehlo.constant":
      splats.add(op.result)
      continue
    source = canon(op.operands[0]) if op.operands else None
    if op.name in _VIEWS and splat(source):
      splats.add(op.result)
    elif op.name in _VIEWS and not space.is_stat(source.shape):
      alias[op.result] = source  # the row it views (or an outside value read over the rows)
      if op.result.shape == space.shape:
        rows.add(source)
    elif op.name not in _VIEWS:
      for v in op.operands:
        v = canon(v)
        end[v] = t
        if v.shape == space.shape and not splat(v):
          rows.add(v)
      for r in op.results:
        start[r] = t
        if r.shape == space.shape:
          rows.add(r)
  for m in members:
    for r in graph.ops[m].results:
      if r in graph.returned or any(u not in inside for u in graph.users.get(r, ())):
        end[canon(r)] = len(sequence)
  spans = [(start.get(v, 0), end.get(v, start.get(v, 0))) for v in rows]
  count = max((sum(a <= t <= b for a, b in spans) for t in range(len(sequence))), default=0)
  widest = max((v.dtype.itemsize for v in rows), default=1)
  return count, widest


def _grow(graph: ClusterGraph, seed: int, space: RowSpace, spaces: dict[int, RowSpace]) -> None:
  cluster = graph.cluster[seed]
  spaces[cluster] = space
  work = [seed]
  while work:
    m = work.pop()
    op = graph.ops[m]
    neighbours = [graph.producer[v] for v in op.operands if v in graph.producer]
    neighbours += [u for r in op.results for u in graph.users.get(r, ())]
    for j in neighbours:
      other = graph.cluster[j]
      if other == cluster or spaces.get(other, space) != space:
        continue
      if not all(is_member(graph.ops[i], space) for i in graph.members[other]):
        continue
      count, widest = _row_values(graph, graph.members[cluster] + graph.members[other], space)
      if not rows_fit(space.columns, widest, count):
        continue
      first, last = sorted((cluster, other), key=lambda c: graph.pos[c])
      moved = graph.members[other]
      if not graph.try_merge(first, last):
        continue
      spaces.pop(first, None)
      cluster = last
      spaces[cluster] = space
      work.extend(moved)


def _computes(graph: ClusterGraph, members: list[int]) -> int:
  return sum(graph.ops[m].name not in _VIEWS for m in members)


def _row_broadcasts_read_outside(graph: ClusterGraph, c: int, space: RowSpace) -> list[int]:
  """Members of cluster `c` broadcasting a statistic over the rows whose readers all lie outside
  it: stored from the fusion they would be a row tile written with element-sized runs (the
  statistic's cell read with stride 0), so they stay outside, after it, and their readers read
  the statistic."""
  def read_outside(m: int) -> bool:
    op = graph.ops[m]
    if op.name != "stablehlo.broadcast_in_dim" or op.result.shape != space.shape:
      return False
    users = graph.users.get(op.result, ())
    return ((op.result in graph.returned or bool(users))
            and all(graph.cluster[u] != c for u in users))
  return [m for m in graph.members[c] if read_outside(m)]


def _fuse_block(block: Block) -> None:
  body, terminator = block.ops[:-1], block.ops[-1:]
  graph = ClusterGraph(body, block.terminator.operands)
  spaces: dict[int, RowSpace] = {}
  for i, op in enumerate(body):
    space = row_space(op)
    if space is not None and graph.cluster[i] not in spaces:
      _grow(graph, i, space, spaces)
  fused = {c: s for c, s in spaces.items() if c in graph.members
           and _computes(graph, graph.members[c]) >= 2}
  if not fused:
    return
  new_ops, mapping = [], {}
  for c in graph.order:
    if c is None:
      continue
    if c in fused:
      space = fused[c]
      after = _row_broadcasts_read_outside(graph, c, space)
      op, results = fused_op(graph, [m for m in graph.members[c] if m not in after], ROW_FUSION)
      op.attrs["row_shape"] = list(space.shape)
      op.attrs["reduced_dims"] = space.reduced
      new_ops.append(op)
      new_ops.extend(graph.ops[m] for m in after)
      mapping.update(results)
    else:
      new_ops.extend(graph.ops[m] for m in graph.members[c])
  block.ops = new_ops + terminator
  for op in block.ops:
    replace_uses(op, mapping)


def run(module: Module) -> None:
  for function in module.functions.values():
    for block in list(control_flow_blocks(function.body)):
      _fuse_block(block)
