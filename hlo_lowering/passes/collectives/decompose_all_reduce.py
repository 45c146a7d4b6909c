"""decompose-all-reduce: an all_reduce whose result feeds elementwise compute becomes a
reduce_scatter, that compute on each core's piece, and one all_gather of the one value that
leaves the compute (a scaled or clipped gradient psum computes 1/n of its elementwise work per
core).

A ring all_reduce moves its bytes as a reduce_scatter then an all_gather (the interconnect
model's 2 (n − 1) steps; docs/multi-device.md "Timing model"), so with one value leaving the
compute the decomposition moves the same bytes and pays one more collective's issue; it is done
where the all_reduce's operand is at least MIN_BYTES (est.: there a piece's compute saved
outweighs the issue). The all_reduce's group-order fold is the reduce_scatter's, and an
elementwise op of pieces is the piece of the op, so results are bit-identical.

The compute: the elementwise ops (partition/propagation.ELEMENTWISE) of the all_reduce's result
shape that read the result or compute already taken. Their other operands must be splats
(rebuilt at the piece's shape) or values every core of the group holds alike — replicated
arguments, constants, results of all_reduces and all_gathers over the same groups, and what is
computed from those only — sliced to this core's piece (a dynamic_slice at a per-core offset, a
GpSimd copy: done only where the compute holds at least SLICE_COST ops per value sliced). A
pmap's arguments are per-core values, so a pmap'd `w - psum(g)` stays an all_reduce: `w` may
differ between cores. Each op keeps its place in the block; the all_gather goes right after the
op whose value leaves (is read by any other op, or returned).

Requires: resolve-collective-groups (attrs["core_groups"]); module.attrs["mhlo.num_partitions"]
and ["mhlo.num_replicas"]; partition-spmd's module.attrs["trn.parameter_shardings"] (which
arguments are replicated).
Ensures: every all_reduce of at least MIN_BYTES feeding such compute with one value leaving it
is a reduce_scatter, the compute on pieces and an all_gather; nothing else changes.
Runs after: combine-all-reduces (whose buckets of small all_reduces it leaves alone).
"""

from __future__ import annotations

import numpy as np

from hlo_lowering.ir import Module, Op, TensorType, Value
from hlo_lowering.passes.collectives.combine_all_reduces import walk_ops_of
from hlo_lowering.passes.partition.propagation import ELEMENTWISE
from hlo_lowering.passes.partition.local_values import core_offset, splat_at, splat_scalar
from hlo_lowering.program import DType

MIN_BYTES = 256 << 10
# Slicing a value to this core's piece (a dynamic_slice at a per-core offset, a GpSimd copy) costs
# about as much modeled time as SLICE_COST elementwise ops on the whole value save by running on
# pieces (trn2, 4 cores, 4 MiB f32: a 1 MiB piece's slice 91 µs; an elementwise op 95 → 24 µs).
SLICE_COST = 4
# Ops whose result differs between cores even from equal operands.
_PER_CORE = frozenset({"stablehlo.partition_id", "stablehlo.replica_id", "stablehlo.custom_call",
                       "stablehlo.reduce_scatter", "stablehlo.all_to_all",
                       "stablehlo.collective_permute", "stablehlo.infeed", "stablehlo.recv",
                       "stablehlo.rng", "stablehlo.rng_bit_generator"})
_UNIFORM_ACROSS_GROUP = frozenset({"stablehlo.all_reduce", "stablehlo.all_gather",
                                   "stablehlo.collective_broadcast"})


def _uniform(module: Module, groups: list[list[int]]) -> set:
  """The values of main's body every core of each of `groups` holds alike."""
  main = module.main
  shardings = module.attrs.get("trn.parameter_shardings")
  uniform = {arg for arg, text in zip(main.args, shardings or []) if text == "{replicated}"}
  for op in main.body.ops:
    if op.name in _UNIFORM_ACROSS_GROUP:
      same = op.attrs.get("core_groups") == groups
    elif op.name in _PER_CORE:
      same = False
    else:
      inner = list(walk_ops_of(op))
      defined = {v for o in inner for region in o.regions for v in region.block.args} | \
          {r for o in inner[1:] for r in o.results}
      same = all(v in uniform or v in defined for o in inner for v in o.operands) and \
          not any(o.name in _PER_CORE for o in inner)
    if same:
      uniform.update(op.results)
  return uniform


def _compute(ops: list[Op], start: int, reduced: Value) -> list[Op]:
  """The elementwise ops after ops[start] reading `reduced` or each other (see the docstring)."""
  taken: set[Value] = {reduced}
  compute = []
  for op in ops[start + 1:]:
    if op.name not in ELEMENTWISE or len(op.results) != 1 or op.regions or \
        any(v.shape != reduced.shape for v in [*op.operands, op.result]) or \
        not taken & set(op.operands):
      continue
    compute.append(op)
    taken.add(op.result)
  return compute


def _leaving(ops: list[Op], compute: list[Op], reduced: Value) -> list[Value]:
  """The values of the compute (and the reduced one) read outside it."""
  inside = {id(op) for op in compute}
  produced = {reduced} | {op.result for op in compute}
  read_outside = {v for op in ops if id(op) not in inside
                  for inner in walk_ops_of(op) for v in inner.operands}
  return [v for v in [reduced] + [op.result for op in compute] if v in read_outside & produced]


def _decompose(module: Module, index: int, num_cores: int) -> list[Op] | None:
  ops = module.main.body.ops
  all_reduce = ops[index]
  if len(all_reduce.operands) != 1 or all_reduce.operands[0].type.nbytes < MIN_BYTES:
    return None
  groups = all_reduce.attrs["core_groups"]
  n = len(groups[0])
  reduced = all_reduce.results[0]
  dims = [d for d, size in enumerate(reduced.shape) if size % n == 0]
  position = {rank: k for group in groups for k, rank in enumerate(group)}
  if n < 2 or not dims or sorted(position) != list(range(num_cores)):
    return None
  compute = _compute(ops, index, reduced)
  leaving = _leaving(ops, compute, reduced)
  if not compute or len(leaving) != 1:
    return None
  producers = {r: op for op in ops for r in op.results}
  uniform = _uniform(module, groups)
  computed = {reduced} | {op.result for op in compute}
  outside = {v for op in compute for v in op.operands
             if v not in computed and splat_scalar(producers.get(v)) is None}
  if not outside <= uniform or SLICE_COST * len(outside) > len(compute):
    return None
  d = dims[0]
  piece_shape = tuple(size // n if i == d else size for i, size in enumerate(reduced.shape))
  loc = all_reduce.loc
  rank: list[Value] = []  # emitted once, on first use
  new_ops: list[Op] = []

  def emit(name, operands, result_type, loc, **attrs) -> Value:
    op = Op(name, operands, [result_type], attrs, loc=loc)
    new_ops.append(op)
    return op.result

  def piece_of(value: Value) -> Value:
    splat = splat_at(emit, producers.get(value), value, piece_shape)
    if splat is not None:
      return splat
    if not rank:
      core = emit("stablehlo.partition_id", [], TensorType((), DType.U32), loc, core_rank=True)
      rank.append(emit("stablehlo.convert", [core], TensorType((), DType.S32), loc))
    zero = emit("stablehlo.constant", [], TensorType((), DType.S32), loc,
                value=np.array(0, np.int32))
    offset = core_offset(emit, rank[0], [position[r] * piece_shape[d] for r in range(num_cores)],
                         loc)
    starts = [offset if i == d else zero for i in range(len(piece_shape))]
    return emit("stablehlo.dynamic_slice", [value, *starts], TensorType(piece_shape, value.dtype),
                loc, slice_sizes=list(piece_shape))

  scatter = Op("stablehlo.reduce_scatter", list(all_reduce.operands),
               [TensorType(piece_shape, reduced.dtype)],
               dict(all_reduce.attrs, scatter_dimension=d), all_reduce.regions, loc)
  pieces = {reduced: scatter.result}
  in_compute = {id(op) for op in compute}
  whole: dict[Value, Value] = {}
  for i, op in enumerate(ops):
    if i == index:
      new_ops.append(scatter)
      value = reduced
    elif id(op) in in_compute:
      operands = [pieces[v] if v in pieces else piece_of(v) for v in op.operands]
      new_ops.append(Op(op.name, operands, [TensorType(piece_shape, op.result.dtype)],
                        dict(op.attrs), loc=op.loc))
      value = op.result
      pieces[value] = new_ops[-1].result
    else:
      for inner in walk_ops_of(op):
        inner.operands = [whole.get(v, v) for v in inner.operands]
      new_ops.append(op)
      continue
    if value in leaving:
      whole[value] = emit("stablehlo.all_gather", [pieces[value]], value.type, loc,
                          all_gather_dim=d, core_groups=groups)
  return new_ops


def run(module: Module) -> None:
  num_cores = (int(module.attrs.get("mhlo.num_partitions", 1) or 1) *
               int(module.attrs.get("mhlo.num_replicas", 1) or 1))
  body = module.main.body
  index = 0
  while index < len(body.ops):
    if body.ops[index].name == "stablehlo.all_reduce":
      rewritten = _decompose(module, index, num_cores)
      if rewritten is not None:
        body.ops = rewritten
    index += 1
