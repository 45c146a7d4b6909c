"""partition-spmd: the global module of a multi-core program becomes the local program every
core runs (docs/multi-device.md "Partitioning").

The scheme is correct by construction rather than clever: outside manual computations every
core computes the whole global value, except that an elementwise op on operands that have local
shards under one sharding also gets a local twin (see propagate), so elementwise chains from
sharded arguments to results of the same sharding stay local. A sharded argument arrives as this core's shard and is
all-gathered to the global value; a sharded result is this core's slice of the global value
(a dynamic_slice at offsets looked up by partition_id). An sdy.manual_computation (shard_map,
pmap) is inlined: each operand is sliced to this core's shard along the manual axes, the body
runs on local values with its own collectives, and each result is all-gathered back. Where an
argument feeds a manual computation with the same sharding, or a manual computation's result is
returned with the same sharding, the local value is used directly (no gather, no slice): pmap
and shard_map programs move no data beyond their own collectives.

Requires: calls inlined (inline-calls); module.attrs["mhlo.num_partitions"] the core count.
Ensures: no sdy.manual_computation; main's arguments and results have their per-core shapes;
module.attrs["trn.parameter_shardings"] / ["trn.output_shardings"] hold each one's HLO
sharding text; every collective it adds carries attrs["core_groups"].
Runs after: inline-calls.
"""

from __future__ import annotations

import numpy as np

from hlo_lowering.errors import CompileError, INVALID_ARGUMENT, UNIMPLEMENTED
from hlo_lowering.ir import (Block, Module, Op, Region, TensorType, Value, clone_block,
                             replace_uses, walk_ops)
from hlo_lowering.lowering.gpsimd.reduce import REDUCERS, identity
from hlo_lowering.passes.canonicalize import reducer_of
from hlo_lowering.passes.partition import gspmd, sharding as sharding_text
from hlo_lowering.passes.partition.mesh import Mesh
from hlo_lowering.passes.partition.sharding import Sharding
from hlo_lowering.program import DType

_I32 = TensorType((), DType.S32)
# Ops that apply element by element to operands of the result's shape (propagate).
_ELEMENTWISE = frozenset("stablehlo." + name for name in (
    "abs add and atan2 cbrt ceil compare convert cosine divide exponential exponential_minus_one "
    "floor is_finite log log_plus_one logistic maximum minimum multiply negate not or popcnt "
    "power remainder round_nearest_afz round_nearest_even rsqrt select shift_left "
    "shift_right_arithmetic shift_right_logical sign sine sqrt subtract tan tanh xor").split())
# torch_xla's GSPMD annotations (custom calls in HLO).
_GSPMD_CALLS = frozenset({"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape"})


class _Partitioner:
  def __init__(self, module: Module, num_cores: int):
    self.num_cores = num_cores
    self.meshes = {name: Mesh.parse(text) for name, text in module.attrs.get("sdy.meshes", {}).items()}
    for name, mesh in self.meshes.items():
      if mesh.size not in (1, num_cores):
        raise CompileError(f"mesh @{name} {mesh.describe()} has {mesh.size} devices but the "
                           f"program runs on {num_cores} cores", INVALID_ARGUMENT)
    self.ops: list[Op] = []     # the rewritten block being built
    self.partition_id: Value | None = None
    # global value -> {sharding: the local value already holding this core's shard of it}
    self.local_of: dict[Value, dict[Sharding, Value]] = {}

  def mesh(self, s: Sharding, what: str) -> Mesh:
    try:
      return self.meshes[s.mesh_name]
    except KeyError:
      raise CompileError(f"{what}: sharding names mesh @{s.mesh_name}, which the module does "
                         "not declare", INVALID_ARGUMENT) from None

  def emit(self, name, operands, result_type, loc, **attrs) -> Value:
    op = Op(name, operands, [result_type], attrs, loc=loc)
    self.ops.append(op)
    return op.result

  # --- global <-> local -------------------------------------------------------------------

  def gather(self, local: Value, s: Sharding, global_type: TensorType, loc) -> Value:
    """The global value from every core's shard `local` (one all_gather per sharded dim)."""
    mesh = self.mesh(s, "all_gather")
    value = local
    for d, axes in enumerate(s.dims):
      if s.shards(mesh, d) == 1:  # unsplit, or split along axes of size 1
        continue
      shape = list(value.shape)
      shape[d] *= s.shards(mesh, d)
      value = self.emit("stablehlo.all_gather", [value], TensorType(tuple(shape), value.dtype), loc,
                        all_gather_dim=d, core_groups=mesh.groups(list(axes)))
    assert value.shape == global_type.shape
    return value

  def rank(self, loc) -> Value:
    if self.partition_id is None:
      pid = self.emit("stablehlo.partition_id", [], TensorType((), DType.U32), loc, core_rank=True)
      self.partition_id = self.emit("stablehlo.convert", [pid], _I32, loc)
    return self.partition_id

  def slice(self, value: Value, s: Sharding, loc, what: str) -> Value:
    """This core's shard of the global `value` under `s`."""
    mesh = self.mesh(s, what)
    local = s.local_shape(value.shape, mesh, what)
    if local == value.shape:
      return value
    starts = []
    for d, axes in enumerate(s.dims):
      if s.shards(mesh, d) == 1:
        starts.append(self.emit("stablehlo.constant", [], _I32, loc, value=np.array(0, np.int32)))
        continue
      table = np.array([mesh.index_along(p, list(axes)) * local[d] for p in range(self.num_cores)],
                       np.int32)
      table_value = self.emit("stablehlo.constant", [], TensorType((self.num_cores,), DType.S32),
                              loc, value=table)
      start = self.emit("stablehlo.dynamic_slice", [table_value, self.rank(loc)],
                        TensorType((1,), DType.S32), loc, slice_sizes=[1])
      starts.append(self.emit("stablehlo.reshape", [start], _I32, loc))
    return self.emit("stablehlo.dynamic_slice", [value, *starts], TensorType(local, value.dtype),
                     loc, slice_sizes=list(local))

  def local(self, value: Value, s: Sharding, loc, what: str) -> Value:
    return self.local_of.get(value, {}).get(s) or self.slice(value, s, loc, what)

  def propagate(self, op: Op) -> None:
    """An elementwise op whose operands all have local shards under one sharding (or are
    splats) gets a local twin computing its result's shard: an elementwise op commutes with
    slicing, so the twin's result is exactly the shard of the global result. Whichever of the
    two nobody reads is dropped later (canonicalize)."""
    if op.name == "stablehlo.reduce":
      return self.propagate_reduce(op)
    if op.name not in _ELEMENTWISE or len(op.results) != 1 or op.regions:
      return
    shape = op.result.shape
    if any(v.shape != shape for v in op.operands):
      return
    for value in op.operands:
      for s, shard in list(self.local_of.get(value, {}).items()):
        locals_ = [self.local_of.get(v, {}).get(s) or self.local_splat(v, shard.shape)
                   for v in op.operands]
        if all(locals_):
          self.local_of.setdefault(op.result, {})[s] = self.emit(
              op.name, locals_, TensorType(shard.shape, op.result.dtype), op.loc, **op.attrs)
        return

  def propagate_reduce(self, op: Op) -> None:
    """A one-operand reduce (add, max, min, mul, and, or, xor; init its identity) of a sharded
    operand gets a local twin: the reduce of the shard, then an all_reduce over the cores that
    hold the reduced dims' pieces, giving the shard of the result under the kept dims' axes.
    Floats are summed in a different order than the replicated reduce (within float rounding,
    as XLA's partitioned reduce)."""
    reducer = reducer_of(op)
    if len(op.operands) != 2 or reducer not in REDUCERS:
      return
    operand, init = op.operands
    shards = self.local_of.get(operand, {})
    splat = self.producers.get(init)
    if not shards or splat is None or splat.name != "stablehlo.constant" or \
        np.asarray(splat.attrs["value"]).reshape(-1)[0] != identity(reducer, init.dtype):
      return
    dims = set(op.attrs["dimensions"])
    for s, shard in shards.items():
      mesh = self.mesh(s, "reduce")
      reduced_axes = [a for d in sorted(dims) for a in s.dims[d]]
      kept = Sharding(s.mesh_name, tuple(a for d, a in enumerate(s.dims) if d not in dims))
      shape = tuple(n for d, n in enumerate(shard.shape) if d not in dims)
      partial_op = Op(op.name, [shard, init], [TensorType(shape, op.result.dtype)],
                      dict(op.attrs), [Region(clone_block(op.regions[0].block, {}))], op.loc)
      self.ops.append(partial_op)
      value = partial_op.result
      if reduced_axes:
        combine = Op("stablehlo.all_reduce", [value], [value.type],
                     {"core_groups": mesh.groups(reduced_axes)},
                     [Region(clone_block(op.regions[0].block, {}))], op.loc)
        self.ops.append(combine)
        value = combine.result
      self.local_of.setdefault(op.result, {})[kept] = value
      return

  def local_splat(self, value: Value, shape: tuple[int, ...]) -> Value | None:
    """A splat of `value`'s producer (a constant, a broadcast scalar) at the local shape."""
    producer = self.producers.get(value)
    if producer is None:
      return None
    if producer.name == "stablehlo.broadcast_in_dim" and not producer.operands[0].shape:
      return self.emit(producer.name, producer.operands, TensorType(shape, value.dtype),
                       producer.loc, **producer.attrs)
    if producer.name == "stablehlo.constant":
      array = np.asarray(producer.attrs["value"])
      if array.size and (array == array.reshape(-1)[0]).all():
        return self.emit(producer.name, [], TensorType(shape, value.dtype), producer.loc,
                         value=np.broadcast_to(array.reshape(-1)[0], shape))
    return None

  # --- the rewrite ------------------------------------------------------------------------

  def manual_computation(self, op: Op) -> None:
    what = f"sdy.manual_computation at {op.loc}"
    manual = sharding_text.manual_axes(op.attrs.get("manual_axes", ""))
    ins = [s.restricted(manual) for s in sharding_text.per_value(op.attrs["in_shardings"], what)]
    outs = [s.restricted(manual) for s in sharding_text.per_value(op.attrs["out_shardings"], what)]
    body = op.regions[0].block
    mapping = {arg: self.local(v, s, op.loc, f"{what} operand {i}")
               for i, (arg, v, s) in enumerate(zip(body.args, op.operands, ins))}
    for inner in walk_ops(body):
      if inner.name == "sdy.manual_computation":
        raise CompileError(f"{what}: a nested manual computation (shard_map inside shard_map) is "
                           "not supported yet", UNIMPLEMENTED)
    replace_uses(body, mapping)
    returned = [mapping.get(v, v) for v in body.ops[-1].operands]
    self.ops.extend(body.ops[:-1])
    results = {}
    for result, local, s in zip(op.results, returned, outs):
      results[result] = self.gather(local, s, result.type, op.loc)
      self.local_of.setdefault(results[result], {})[s] = local
    self.pending.update(results)

  def gspmd_call(self, op: Op) -> None:
    """torch_xla's sharding annotation of an intermediate value: an identity here (the value
    is whole on every core); its manual-sharding conversions are refused."""
    target = op.attrs["call_target_name"]
    if target != "Sharding":
      raise CompileError(f"{op.describe()}: custom_call @{target} (manual GSPMD sharding) is not "
                         "supported yet", UNIMPLEMENTED)
    self.pending[op.result] = self.pending.get(op.operands[0], op.operands[0])

  def run(self, module: Module) -> None:
    main = module.main
    module.attrs["trn.global_signature"] = ([a.type for a in main.args], list(main.result_types))
    new_args, param_texts = [], []
    self.pending: dict[Value, Value] = {}
    self.producers: dict[Value, Op] = {}
    for i, (arg, attrs) in enumerate(zip(main.args, main.arg_attrs)):
      s = self.sharding_attr(attrs, f"argument {i}", len(arg.shape))
      mesh = self.mesh(s, f"argument {i}") if s else None
      param_texts.append(s.hlo_text(mesh) if s else "{replicated}")
      if s is None or s.is_replicated:
        new_args.append(arg)
        continue
      local = Value(TensorType(s.local_shape(arg.shape, mesh, f"argument {i} {arg.type}"), arg.dtype))
      new_args.append(local)
      self.pending[arg] = self.gather(local, s, arg.type, main.body.ops[0].loc if main.body.ops else None)
      self.local_of.setdefault(self.pending[arg], {})[s] = local
    body_ops = main.body.ops
    for op in body_ops[:-1]:
      op.operands = [self.pending.get(v, v) for v in op.operands]
      for inner in walk_ops(Block([], [op])):
        inner.operands = [self.pending.get(v, v) for v in inner.operands]
      if op.name == "sdy.manual_computation":
        self.manual_computation(op)
      elif op.name == "stablehlo.custom_call" and op.attrs.get("call_target_name") in _GSPMD_CALLS:
        self.gspmd_call(op)
      else:
        self.ops.append(op)
        self.producers.update((r, op) for r in op.results)
        self.propagate(op)
    ret = body_ops[-1]
    outputs, output_texts = [], []
    for i, (value, attrs) in enumerate(zip(ret.operands, main.result_attrs)):
      value = self.pending.get(value, value)
      s = self.sharding_attr(attrs, f"result {i}", len(value.shape))
      if s is None or s.is_replicated:
        outputs.append(value)
        output_texts.append("{replicated}")
        continue
      outputs.append(self.local(value, s, ret.loc, f"result {i} {value.type}"))
      output_texts.append(s.hlo_text(self.mesh(s, f"result {i}")))
    ret.operands = outputs
    main.body = Block(new_args, self.ops + [ret])
    main.result_types = [v.type for v in outputs]
    module.attrs["trn.parameter_shardings"] = param_texts
    module.attrs["trn.output_shardings"] = output_texts

  def sharding_attr(self, attrs: dict, what: str, rank: int) -> Sharding | None:
    text = attrs.get("sdy.sharding")
    if not text and attrs.get("mhlo.sharding"):
      parsed = gspmd.parse(attrs["mhlo.sharding"], rank, f"gspmd.{len(self.meshes)}", what)
      if parsed is None:
        return None
      mesh, s = parsed
      if mesh.size != self.num_cores:
        raise CompileError(f"{what}: the sharding {attrs['mhlo.sharding']} names {mesh.size} "
                           f"devices but the program runs on {self.num_cores} cores",
                           INVALID_ARGUMENT)
      self.meshes[s.mesh_name] = mesh
      return s
    if not text:
      return None
    s = Sharding.parse(text, what)
    if len(s.dims) != rank:
      raise CompileError(f"{what}: a rank-{len(s.dims)} sharding for a rank-{rank} value",
                         INVALID_ARGUMENT)
    return s


def run(module: Module) -> None:
  num_cores = int(module.attrs.get("mhlo.num_partitions", 1) or 1)
  if num_cores <= 1:
    _check_no_manual(module)
    return
  _Partitioner(module, num_cores).run(module)


def _check_no_manual(module: Module) -> None:
  """A one-core program may still carry a manual computation (shard_map over a 1-device
  mesh): its body is the program, inlined as is."""
  main = module.main
  ops = []
  for op in main.body.ops:
    if op.name != "sdy.manual_computation":
      ops.append(op)
      continue
    body = op.regions[0].block
    replace_uses(body, dict(zip(body.args, op.operands)))
    ops.extend(body.ops[:-1])
    replace_uses(Block([], main.body.ops), dict(zip(op.results, body.ops[-1].operands)))
  main.body.ops = ops
