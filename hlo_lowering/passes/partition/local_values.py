"""The partitioner's per-core values (docs/multi-device.md "Partitioning"): for each global value
of the program, the local values already holding this core's shard of it under some sharding
(`local_of`), partial sums whose all_reduce over some mesh axes gives one (`partial_of`), or the
whole value (`global_of`); and getting a value under any sharding with the fewest bytes moved.

Bytes are counted as each core receives them on a ring (the interconnect model's algorithm,
docs/multi-device.md "Timing model"): an all_gather of k shards receives (k − 1) shards, an
all_to_all (k − 1)/k of its buffer, a reduce_scatter (k − 1)/k of its input, an all_reduce twice
that; slicing a value a core already holds whole along a dim is free (a local dynamic_slice)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from hlo_lowering.errors import CompileError, INVALID_ARGUMENT
from hlo_lowering.ir import Block, Op, Region, TensorType, Value, clone_block
from hlo_lowering.passes.partition.mesh import Mesh
from hlo_lowering.passes.partition.propagation import operand_shardings
from hlo_lowering.passes.partition.sharding import Sharding
from hlo_lowering.program import DType

_I32 = TensorType((), DType.S32)
# How many ops back a whole value read as a shard is generated from (a causal mask's iota,
# broadcasts and compare are a few): bounds the search and the recursion.
_GENERATED_DEPTH = 16
# Ops too costly to run again on a shard next to their whole value.
_NOT_GENERATED = frozenset({"stablehlo.dot_general"})


@dataclasses.dataclass(frozen=True)
class Partial:
  """Per-core partial results: their `reducer` fold over the cores that differ only along `axes`
  is this core's shard of the value under `sharding` (a dot_general contracting a sharded dim)."""
  sharding: Sharding
  axes: tuple[str, ...]
  value: Value
  reducer: Block       # the combining body
  reducer_name: str    # its reducer_of name ("add", "max", ...)


def add_body(dtype: DType) -> Block:
  """The reduction body `return a + b` over scalars of `dtype`."""
  a, b = Value(TensorType((), dtype)), Value(TensorType((), dtype))
  add = Op("stablehlo.add", [a, b], [TensorType((), dtype)])
  return Block([a, b], [add, Op("stablehlo.return", [add.result], [])])


def core_offset(emit, rank: Value, offsets: list[int], loc) -> Value:
  """The s32 scalar `offsets[rank]`: this core's entry of a per-core table (`rank` its s32
  rank; `emit(name, operands, type, loc, **attrs)` adds an op)."""
  table = emit("stablehlo.constant", [], TensorType((len(offsets),), DType.S32), loc,
               value=np.array(offsets, np.int32))
  start = emit("stablehlo.dynamic_slice", [table, rank], TensorType((1,), DType.S32), loc,
               slice_sizes=[1])
  return emit("stablehlo.reshape", [start], _I32, loc)


def splat_scalar(producer: Op | None):
  """The one value of a splat (a constant of equal elements, a broadcast scalar's operand
  Value), or None."""
  if producer is None:
    return None
  if producer.name == "stablehlo.broadcast_in_dim" and not producer.operands[0].shape:
    return producer.operands[0]
  if producer.name == "stablehlo.constant":
    array = np.asarray(producer.attrs["value"])
    if array.size and (array == array.reshape(-1)[0]).all():
      return array.reshape(-1)[0]
  return None


def _ring(k: int) -> float:
  return (k - 1) / k


class LocalValues:
  def __init__(self, meshes: dict[str, Mesh], num_cores: int):
    self.meshes = meshes
    self.num_cores = num_cores
    self.ops: list[Op] = []  # the local program being built
    self.local_of: dict[Value, dict[Sharding, Value]] = {}
    self.partial_of: dict[Value, Partial] = {}
    self.global_of: dict[Value, Value] = {}
    self.gathered: set[Value] = set()  # values whose whole was gathered from shards
    self.producers: dict[Value, Op] = {}  # the global program's ops, by result
    self.partition_id: Value | None = None
    self.hints: dict[Value, Sharding] = {}  # the shardings values are wanted under (propagation)
    self.generating = 0  # how many generated values' producers are being made at once

  def mesh(self, s: Sharding, what: str) -> Mesh:
    try:
      return self.meshes[s.mesh_name]
    except KeyError:
      raise CompileError(f"{what}: sharding names mesh @{s.mesh_name}, which the module does "
                         "not declare", INVALID_ARGUMENT) from None

  def emit(self, name, operands, result_type, loc, regions=(), **attrs) -> Value:
    op = Op(name, operands, [result_type], attrs, list(regions), loc)
    self.ops.append(op)
    return op.result

  def is_sharded(self, v: Value) -> bool:
    """Whether `v` exists only as per-core pieces so far (its whole value costs collectives)."""
    if v in self.global_of or (v not in self.local_of and v not in self.partial_of):
      return False
    return not any(s.is_replicated for s in self.local_of.get(v, {}))

  def shardings(self, v: Value) -> list[Sharding]:
    """The shardings `v` is held under (its partial's as summed), most split first."""
    held = list(self.local_of.get(v, {}))
    if v in self.partial_of:
      held.append(self.partial_of[v].sharding)
    return sorted(held, key=lambda s: -self.shard_count(s))

  def shard_count(self, s: Sharding) -> int:
    mesh = self.mesh(s, "sharding")
    return math.prod(s.shards(mesh, d) for d in range(len(s.dims)))

  def divides(self, shape: tuple[int, ...], s: Sharding) -> bool:
    mesh = self.mesh(s, "sharding")
    return all(n % s.shards(mesh, d) == 0 for d, n in enumerate(shape))

  def local_bytes(self, t: TensorType, s: Sharding) -> int:
    return t.nbytes // self.shard_count(s)

  # --- bytes moved -------------------------------------------------------------------------

  def cost(self, v: Value, t: Sharding) -> float:
    """The bytes this core receives to hold `v` under `t`."""
    if t in self.local_of.get(v, {}) or not self.is_sharded(v):
      return 0.0  # held, or sliced from the whole value
    return min(plan[0] for plan in self._plans(v, t))

  def _plans(self, v: Value, t: Sharding):
    """(bytes, kind, source) for each way to get `v` under `t`."""
    for r, local in self.local_of.get(v, {}).items():
      yield self.reshard_cost(v.type, r, t), "local", r
    partial = self.partial_of.get(v)
    if partial is not None:
      k = math.prod(self.mesh(partial.sharding, "partial").axis_size(a) for a in partial.axes)
      nbytes = self.local_bytes(v.type, partial.sharding)
      if self._scatter_dim(partial, t) is not None:
        yield nbytes * _ring(k), "reduce_scatter", None
      yield 2 * nbytes * _ring(k) + self.reshard_cost(v.type, partial.sharding, t), "all_reduce", None

  def _scatter_dim(self, partial: Partial, t: Sharding) -> int | None:
    """The dim a reduce_scatter of `partial` splits to give the value under `t`, if one does:
    `t` splits one dim further by exactly the summed axes."""
    s = partial.sharding
    if s.mesh_name != t.mesh_name or len(s.dims) != len(t.dims):
      return None
    differing = [d for d in range(len(s.dims)) if s.dims[d] != t.dims[d]]
    if len(differing) != 1:
      return None
    d, = differing
    prefix = len(s.dims[d])
    if t.dims[d][:prefix] != s.dims[d] or sorted(t.dims[d][prefix:]) != sorted(partial.axes):
      return None
    return d

  def _moved_axis(self, r: Sharding, t: Sharding) -> tuple[int, int, str] | None:
    """(from dim, to dim, axis) when `t` is `r` with the minor axis of one dim moved to the
    minor end of another: one all_to_all."""
    differing = [d for d in range(len(r.dims)) if r.dims[d] != t.dims[d]]
    if r.mesh_name != t.mesh_name or len(differing) != 2:
      return None
    for a, b in (differing, differing[::-1]):
      if r.dims[a] and t.dims[a] == r.dims[a][:-1] and t.dims[b] == r.dims[b] + r.dims[a][-1:]:
        return a, b, r.dims[a][-1]
    return None

  def reshard_cost(self, global_type: TensorType, r: Sharding, t: Sharding) -> float:
    if r == t:
      return 0.0
    if self._moved_axis(r, t) is not None:
      a, _, axis = self._moved_axis(r, t)
      return self.local_bytes(global_type, r) * _ring(self.mesh(r, "all_to_all").axis_size(axis))
    mesh = self.mesh(r, "all_gather")
    nbytes, total = self.local_bytes(global_type, r), 0.0
    for d in range(len(r.dims)):
      if r.mesh_name != t.mesh_name or t.dims[d][:len(r.dims[d])] != r.dims[d]:
        k = r.shards(mesh, d)
        total += nbytes * (k - 1)
        nbytes *= k
    return total

  # --- getting a value under a sharding ----------------------------------------------------

  def under(self, v: Value, t: Sharding, loc, what: str) -> Value:
    """`v`'s local value under `t`, by the cheapest of the ways `v` is held."""
    held = self.local_of.get(v, {})
    if t in held:
      return held[t]
    if not self.is_sharded(v):
      local = (self.local_splat(v, t) or self.generated(v, t, loc) or
               self.slice(self.whole(v, loc), t, loc, what))
      self.global_of.setdefault(v, v)
      self.local_of.setdefault(v, {})[t] = local
      return local
    held = self.local_of.setdefault(v, {})
    _, kind, source = min(self._plans(v, t), key=lambda plan: plan[0])
    if kind == "local":
      local = self.reshard(v.type, held[source], source, t, loc, what)
    elif kind == "reduce_scatter":
      local = self.reduce_scatter(v, t, loc)
    else:
      partial = self.partial_of[v]
      local = self.reshard(v.type, self.all_reduce(v, loc), partial.sharding, t, loc, what)
    held[t] = local
    return local

  def hold(self, v: Value, s: Sharding, local: Value) -> None:
    """Records `local` as this core's value of `v` under `s`: its shard, or its partial sums
    when `s` is unreduced."""
    if s.unreduced:
      self.partial_of[v] = Partial(s.summed, s.unreduced, local, add_body(v.dtype), "add")
    else:
      self.local_of.setdefault(v, {})[s] = local

  def unreduced(self, v: Value, t: Sharding, loc, what: str) -> Value:
    """This core's partial sums of `v` under `t`, an unreduced sharding: added up over the cores
    that differ only along `t.unreduced` they give the core's shard under `t.summed`. Partial
    sums of `v` over some of those axes are kept (moved like shards: a sum commutes with
    gathers and slices); any other partial sums are reduced first. Along the axes `v` is not
    summed over, the first core holds the value and the others zeros, so it is summed once."""
    summed, partial = t.summed, self.partial_of.get(v)
    if partial is not None and partial.reducer_name == "add" and \
        set(partial.axes) <= set(t.unreduced):
      local = self.reshard(v.type, partial.value, partial.sharding, summed, loc, what)
      held = set(partial.axes)
    else:
      local, held = self.under(v, summed, loc, what), set()
    missing = [a for a in t.unreduced if a not in held]
    if not missing:
      return local
    mesh = self.mesh(t, what)
    first = [int(mesh.index_along(p, missing) == 0) for p in range(self.num_cores)]
    flag = core_offset(self.emit, self.rank(loc), first, loc)
    zero = self.emit("stablehlo.constant", [], _I32, loc, value=np.array(0, np.int32))
    keep = self.emit("stablehlo.compare", [flag, zero], TensorType((), DType.PRED), loc,
                     comparison_direction="NE", compare_type="SIGNED")
    keep = self.emit("stablehlo.broadcast_in_dim", [keep], TensorType(local.shape, DType.PRED),
                     loc, broadcast_dimensions=[])
    zeros = self.emit("stablehlo.constant", [], local.type, loc,
                      value=np.zeros(local.shape, local.dtype.numpy))
    return self.emit("stablehlo.select", [keep, local, zeros], local.type, loc)

  def whole(self, v: Value, loc) -> Value:
    """`v`'s global value (gathered from its shards once, then reused)."""
    if v in self.global_of:
      return self.global_of[v]
    held = self.local_of.get(v, {})
    replicated = [local for s, local in held.items() if s.is_replicated]
    if replicated:
      whole = replicated[0]
    elif held:
      source = min(held, key=lambda s: self.reshard_cost(v.type, s, self._replicated(s)))
      whole = self.gather(held[source], source, v.type, loc)
      self.gathered.add(v)
    elif v in self.partial_of:
      partial = self.partial_of[v]
      whole = self.gather(self.all_reduce(v, loc), partial.sharding, v.type, loc)
      self.gathered.add(v)
    else:
      return v  # a value of the global program, whole on every core
    self.global_of[v] = whole
    return whole

  @staticmethod
  def _replicated(s: Sharding) -> Sharding:
    return Sharding(s.mesh_name, tuple(() for _ in s.dims))

  def all_reduce(self, v: Value, loc) -> Value:
    partial = self.partial_of[v]
    held = self.local_of.setdefault(v, {})
    if partial.sharding not in held:
      mesh = self.mesh(partial.sharding, "all_reduce")
      held[partial.sharding] = self.emit(
          "stablehlo.all_reduce", [partial.value], partial.value.type, loc,
          [Region(clone_block(partial.reducer, {}))], core_groups=mesh.groups(list(partial.axes)))
    return held[partial.sharding]

  def reduce_scatter(self, v: Value, t: Sharding, loc) -> Value:
    partial = self.partial_of[v]
    d = self._scatter_dim(partial, t)
    mesh = self.mesh(t, "reduce_scatter")
    local = t.local_shape(v.shape, mesh, "reduce_scatter")
    return self.emit("stablehlo.reduce_scatter", [partial.value], TensorType(local, v.dtype), loc,
                     [Region(clone_block(partial.reducer, {}))], scatter_dimension=d,
                     core_groups=mesh.groups(list(t.dims[d][len(partial.sharding.dims[d]):])))

  def reshard(self, global_type: TensorType, local: Value, r: Sharding, t: Sharding, loc,
              what: str) -> Value:
    """`local` (this core's shard under `r`) as this core's shard under `t`."""
    if r == t:
      return local
    moved = self._moved_axis(r, t)
    mesh = self.mesh(r, what)
    if moved is not None:
      a, b, axis = moved
      shape = list(local.shape)
      shape[a] *= mesh.axis_size(axis)
      shape[b] //= mesh.axis_size(axis)
      return self.emit("stablehlo.all_to_all", [local], TensorType(tuple(shape), local.dtype), loc,
                       split_dimension=b, concat_dimension=a, split_count=mesh.axis_size(axis),
                       core_groups=mesh.groups([axis]))
    coarse = list(r.dims)
    for d in range(len(r.dims)):
      if r.mesh_name != t.mesh_name or t.dims[d][:len(r.dims[d])] != r.dims[d]:
        local = self.gather_dim(local, mesh, d, r.dims[d], loc)
        coarse[d] = ()
    return self.refine(local, Sharding(r.mesh_name, tuple(coarse)), t, loc, what)

  # --- gathering and slicing ---------------------------------------------------------------

  def gather_dim(self, local: Value, mesh: Mesh, d: int, axes: tuple[str, ...], loc) -> Value:
    k = math.prod(mesh.axis_size(a) for a in axes)
    if k == 1:
      return local
    shape = list(local.shape)
    shape[d] *= k
    return self.emit("stablehlo.all_gather", [local], TensorType(tuple(shape), local.dtype), loc,
                     all_gather_dim=d, core_groups=mesh.groups(list(axes)))

  def gather(self, local: Value, s: Sharding, global_type: TensorType, loc) -> Value:
    """The global value from every core's shard `local` (one all_gather per sharded dim)."""
    mesh = self.mesh(s, "all_gather")
    for d, axes in enumerate(s.dims):
      local = self.gather_dim(local, mesh, d, axes, loc)
    assert local.shape == global_type.shape
    return local

  # --- generating shards op by op -----------------------------------------------------------

  def local_twin(self, op: Op, t: Sharding) -> Value | None:
    """`op` applied to its operands' shards (propagation.operand_shardings): its result's
    shard under `t`, or None where no rule gives one. An iota split along its counting dim
    adds this core's offset."""
    shardings = operand_shardings(self, op, t)
    if shardings is None:
      return None
    what = op.describe()
    operands = [self.under(v, s, op.loc, what) for v, s in zip(op.operands, shardings)]
    mesh = self.mesh(t, what)
    local_type = TensorType(t.local_shape(op.result.shape, mesh, what), op.result.dtype)
    regions = [Region(clone_block(r.block, {})) for r in op.regions]
    local = self.emit(op.name, operands, local_type, op.loc, regions, **op.attrs)
    dim = op.attrs.get("iota_dimension")
    if op.name == "stablehlo.iota" and t.dims[dim]:
      n = local_type.shape[dim]
      offsets = [mesh.index_along(p, list(t.dims[dim])) * n for p in range(self.num_cores)]
      start = core_offset(self.emit, self.rank(op.loc), offsets, op.loc)
      if local_type.dtype != DType.S32:
        start = self.emit("stablehlo.convert", [start], TensorType((), local_type.dtype), op.loc)
      start = self.emit("stablehlo.broadcast_in_dim", [start], local_type, op.loc,
                        broadcast_dimensions=[])
      local = self.emit("stablehlo.add", [local, start], local_type, op.loc)
    return local

  def generated(self, v: Value, t: Sharding, loc) -> Value | None:
    """The shard under `t` of `v`, a value computed whole, made again op by op from its
    producers' shards when that slices fewer bytes than slicing `v` (a causal mask from an
    iota, a bias broadcast to the activations' shape); None otherwise."""
    depth = _GENERATED_DEPTH - self.generating
    if t.is_replicated or depth <= 0 or \
        self._generated_bytes(v, t, {}, depth) >= self.local_bytes(v.type, t):
      return None
    self.generating += 1
    try:
      return self.local_twin(self.producers[v], t)
    finally:
      self.generating -= 1

  def _generated_bytes(self, v: Value, t: Sharding, memo: dict, depth: int) -> float:
    """The bytes this core slices from whole values to make `v`'s shard under `t`, either
    directly or by generating it from its producer's operands (at most `depth` ops back)."""
    key = (v, t)
    if key not in memo:
      memo[key] = direct = self.local_bytes(v.type, t)
      producer = self.producers.get(v)
      if t in self.local_of.get(v, {}) or t.is_replicated or self.is_splat(v):
        memo[key] = 0.0
      elif depth > 0 and producer is not None and producer.name not in _NOT_GENERATED and \
          not any(map(self.is_sharded, producer.operands)):
        shardings = operand_shardings(self, producer, t)
        if shardings is not None:
          memo[key] = min(direct, sum(self._generated_bytes(o, s, memo, depth - 1)
                                      for o, s in zip(producer.operands, shardings)))
    return memo[key]

  def rank(self, loc) -> Value:
    if self.partition_id is None:
      pid = self.emit("stablehlo.partition_id", [], TensorType((), DType.U32), loc, core_rank=True)
      self.partition_id = self.emit("stablehlo.convert", [pid], _I32, loc)
    return self.partition_id

  def slice(self, value: Value, s: Sharding, loc, what: str) -> Value:
    """This core's shard of the global `value` under `s`."""
    return self.refine(value, Sharding(s.mesh_name, tuple(() for _ in s.dims)), s, loc, what)

  def refine(self, local: Value, r: Sharding, t: Sharding, loc, what: str) -> Value:
    """This core's shard under `t` of `local`, its shard under `r`, where each dim of `t` splits
    the same dim of `r` further (a local dynamic_slice at offsets looked up by partition_id)."""
    mesh = self.mesh(t, what)
    shape = tuple(n * r.shards(mesh, d) for d, n in enumerate(local.shape))
    target = t.local_shape(shape, mesh, what)
    if target == local.shape:
      return local
    starts = []
    for d, axes in enumerate(t.dims):
      finer = list(axes[len(r.dims[d]):])
      if local.shape[d] == target[d]:
        starts.append(self.emit("stablehlo.constant", [], _I32, loc, value=np.array(0, np.int32)))
        continue
      offsets = [mesh.index_along(p, finer) * target[d] for p in range(self.num_cores)]
      starts.append(core_offset(self.emit, self.rank(loc), offsets, loc))
    return self.emit("stablehlo.dynamic_slice", [local, *starts], TensorType(target, local.dtype),
                     loc, slice_sizes=list(target))

  def local_splat(self, value: Value, t: Sharding) -> Value | None:
    """A splat of `value`'s producer (a constant, a broadcast scalar) at the local shape."""
    producer = self.producers.get(value)
    if producer is None or not self.divides(value.shape, t):
      return None
    # A broadcast scalar may itself have been computed on shards: use its whole value.
    return splat_at(self.emit, producer, value,
                    t.local_shape(value.shape, self.mesh(t, "splat"), "splat"),
                    lambda scalar: self.whole(scalar, producer.loc))

  def is_splat(self, value: Value) -> bool:
    return splat_scalar(self.producers.get(value)) is not None


def splat_at(emit, producer: Op | None, value: Value, shape: tuple[int, ...],
             scalar_value=lambda scalar: scalar) -> Value | None:
  """The splat `value` (made by `producer`) rebuilt at `shape`; None when it is no splat.
  `scalar_value` maps a broadcast scalar to the value defined where the splat goes."""
  scalar = splat_scalar(producer)
  if scalar is None:
    return None
  if isinstance(scalar, Value):
    return emit(producer.name, [scalar_value(scalar)], TensorType(shape, value.dtype),
                producer.loc, **producer.attrs)
  return emit("stablehlo.constant", [], TensorType(shape, value.dtype), producer.loc,
              value=np.broadcast_to(scalar, shape))
