"""partition-spmd: the global module of a multi-core program becomes the local program every
core runs (docs/multi-device.md "Partitioning").

Every value is held as this core's shard under some sharding, as partial sums, or whole
(local_values.py). A sharded argument arrives as this core's shard. Each op in turn gets a local
twin computing its result's shard from its operands' shards where a rule gives one (dot_general
in dot_general.py, pad / reduce_window / convolution / sort in local_window_ops.py, gather and
scatter in local_indexing.py, while and case in local_control_flow.py, the others in
local_ops.py), its operands resharded with the fewest bytes moved. Shardings also flow backward
(propagation.py): an op of whole operands whose result every use wants split (by the results'
shardings or a sharding constraint) runs on their shards, and a whole value read as a shard is
generated again from its producers when that slices fewer bytes (an iota at the core's offset).
Any other op runs replicated on its operands' whole values (all-gathered from their shards where
needed, once) and is named in module.attrs["trn.replicated_ops"] when it read a sharded value. A
sharded result is this core's shard (sliced locally from a whole value, or a reduce_scatter of
partial sums); a replicated one the whole value. An sdy.manual_computation (shard_map, pmap) is
inlined: each operand is this core's shard along the manual axes, the body runs on local values
with its own collectives, and each result is held as the core's shard; one nested in its body
is inlined so over its own axes, its results gathered back along them. Every shard is exact (an
op on shards is the shard of the op); only the order floats are summed in changes where a
partial sum or a reduce over a sharded dim is combined across cores.

Requires: calls inlined (inline-calls); module.attrs["mhlo.num_partitions"] the core count.
Ensures: no sdy.manual_computation; main's arguments and results have their per-core shapes;
module.attrs["trn.core_signature"] holds main's per-core argument and result types,
["trn.parameter_shardings"] / ["trn.output_shardings"] each one's HLO sharding text,
["trn.replicated_ops"] the ops run replicated on gathered operands; every collective it adds
carries attrs["core_groups"].
Runs after: inline-calls.
"""

from __future__ import annotations

from hlo_lowering.errors import CompileError, INVALID_ARGUMENT, UNIMPLEMENTED
from hlo_lowering.ir import Block, Module, Op, TensorType, Value, replace_uses, walk_ops
from hlo_lowering.passes.partition import (gspmd, local_indexing, local_control_flow, local_ops,
                                           local_window_ops, propagation,
                                           sharding as sharding_text)
from hlo_lowering.passes.partition.dot_general import dot_general
from hlo_lowering.passes.partition.local_values import LocalValues
from hlo_lowering.passes.partition.mesh import Mesh
from hlo_lowering.passes.partition.sharding import Sharding

_RULES = {**local_ops.RULES, **local_window_ops.RULES, **local_indexing.RULES,
          **local_control_flow.RULES}

# torch_xla's GSPMD annotations (custom calls in HLO).
_GSPMD_CALLS = frozenset({"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape"})


def _meshes(module: Module, num_cores: int) -> dict[str, Mesh]:
  meshes = {name: Mesh.parse(text) for name, text in module.attrs.get("sdy.meshes", {}).items()}
  for name, mesh in meshes.items():
    if mesh.size not in (1, num_cores):
      raise CompileError(f"mesh @{name} {mesh.describe()} has {mesh.size} devices but the "
                         f"program runs on {num_cores} cores", INVALID_ARGUMENT)
  return meshes


class _Partitioner(LocalValues):
  def __init__(self, meshes: dict[str, Mesh], num_cores: int):
    super().__init__(meshes, num_cores)
    self.replicated: list[str] = []  # the ops run replicated on gathered operands
    self.pending: dict[Value, Value] = {}  # identities (torch_xla's annotations): the value
    # Whole values that an unspecified result returns split (a constraint inside a
    # partial-manual body, which XLA's propagation carries to the result).
    self.returned_split: set[Value] = set()

  def nested(self) -> "_Partitioner":
    """A partitioner for a region's ops: it reads the values defined outside as this one holds
    them, and what it adds (reshards of outer values included) stays inside the region."""
    inner = _Partitioner(self.meshes, self.num_cores)
    inner.local_of = {v: dict(held) for v, held in self.local_of.items()}
    inner.partial_of, inner.global_of = dict(self.partial_of), dict(self.global_of)
    inner.gathered, inner.producers = set(self.gathered), dict(self.producers)
    inner.partition_id, inner.replicated, inner.pending = (self.partition_id, self.replicated,
                                                           self.pending)
    return inner

  def partition_ops(self, ops: list[Op]) -> None:
    for op in ops:
      op.operands = [self.pending.get(v, v) for v in op.operands]
      for inner in walk_ops(Block([], [op])):
        inner.operands = [self.pending.get(v, v) for v in inner.operands]
      if op.name == "sdy.manual_computation":
        self.manual_computation(op)
      elif op.name == "stablehlo.custom_call" and op.attrs.get("call_target_name") in _GSPMD_CALLS:
        self.gspmd_call(op)
      else:
        self.producers.update((r, op) for r in op.results)
        self.partition(op)

  def partition(self, op: Op) -> None:
    """`op`'s local twin where a rule gives one; else `op` itself on the whole values of its
    operands (gathered where they are held as shards)."""
    rule = dot_general if op.name == "stablehlo.dot_general" else _RULES.get(op.name)
    if rule is not None and rule(self, op):
      return
    if self.wanted_split(op):
      return
    read = dict.fromkeys(v for inner in walk_ops(Block([], [op])) for v in inner.operands)
    wholes = {v: self.whole(v, op.loc) for v in read}
    if any(v in self.gathered for v in read):
      self.replicated.append(f"{op.name} at {op.loc}")
    replace_uses(Block([], [op]), {v: w for v, w in wholes.items() if w is not v})
    self.ops.append(op)

  def wanted_split(self, op: Op) -> bool:
    """An op of whole operands whose result every use wants split (propagation.hints) runs on
    its operands' shards (sliced, or generated again from their producers)."""
    t = self.hints.get(op.results[0]) if len(op.results) == 1 else None
    if t is None or any(map(self.is_sharded, op.operands)):
      return False
    local = self.local_twin(op, t)
    if local is None:
      return False
    self.local_of[op.result] = {t: local}
    return True

  # --- the rewrite ------------------------------------------------------------------------

  def manual_computation(self, op: Op) -> None:
    what = f"sdy.manual_computation at {op.loc}"
    manual = sharding_text.manual_axes(op.attrs.get("manual_axes", ""))
    ins = [s.restricted(manual) for s in sharding_text.per_value(op.attrs["in_shardings"], what)]
    declared_outs = sharding_text.per_value(op.attrs["out_shardings"], what)
    outs = [s.restricted(manual) for s in declared_outs]
    body = op.regions[0].block
    mapping = {arg: (self.unreduced if s.unreduced else self.under)(v, s, op.loc,
                                                                    f"{what} operand {i}")
               for i, (arg, v, s) in enumerate(zip(body.args, op.operands, ins))}
    nested = [i for i, inner in enumerate(body.ops) if inner.name == "sdy.manual_computation"]
    for inner in walk_ops(Block([], [o for i, o in enumerate(body.ops) if i not in nested])):
      if inner.name == "sdy.manual_computation":
        raise CompileError(f"{what}: a manual computation nested in a region of a shard_map's "
                           "body (shard_map under a loop inside shard_map) is not supported yet",
                           UNIMPLEMENTED)
    replace_uses(body, mapping)
    for i, inner in enumerate(body.ops[:-1]):
      if i not in nested:
        self.ops.append(inner)
        continue
      # A shard_map inside a shard_map: inlined over its own manual axes, reading the outer
      # body's local values as whole; its results are gathered back along those axes.
      self.manual_computation(inner)
      gathered = {r: self.whole(r, inner.loc) for r in inner.results}
      replace_uses(Block([], body.ops[i + 1:]), gathered)
    returned = list(body.ops[-1].operands)
    constrained = {inner.result: inner for inner in body.ops
                   if inner.name in propagation.SHARDING_OPS}
    for result, local, s, declared in zip(op.results, returned, outs, declared_outs):
      self.hold(result, s, local)
      if local in constrained and not s.unreduced:
        self.constrained_result(result, local, s, declared, constrained[local], manual)

  def constrained_result(self, result: Value, local: Value, s: Sharding, declared: Sharding,
                         constraint: Op, manual: set[str]) -> None:
    """A partial-manual body's result constrained along auto axes (its value is whole along
    them) where the out sharding leaves those dims open (`{?}`): also held split so, as XLA's
    propagation carries the constraint to the result (sliced locally, nothing moves)."""
    t = Sharding.parse(constraint.attrs["sharding"], constraint.describe())
    auto = [tuple(a for a in axes if a not in manual) for axes in t.dims]
    if t.mesh_name != s.mesh_name or len(auto) != len(s.dims) or t.unreduced or \
        any(axes and (d not in declared.open_dims or s.dims[d]) for d, axes in enumerate(auto)):
      return
    if any(auto):
      split = Sharding(s.mesh_name, tuple(m or a for m, a in zip(s.dims, auto)))
      self.local_of[result][split] = self.refine(local, s, split, constraint.loc,
                                                 constraint.describe())
      self.returned_split.add(result)

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
    new_args, param_texts = [], []
    for i, (arg, attrs) in enumerate(zip(main.args, main.arg_attrs)):
      s = self.sharding_attr(attrs, f"argument {i}", len(arg.shape))
      mesh = self.mesh(s, f"argument {i}") if s else None
      param_texts.append(s.hlo_text(mesh) if s else "{replicated}")
      if s is None or s.is_replicated:
        new_args.append(arg)
        continue
      local = Value(TensorType(s.local_shape(arg.shape, mesh, f"argument {i} {arg.type}"), arg.dtype))
      new_args.append(local)
      self.hold(arg, s, local)
    body_ops = main.body.ops
    result_shardings = [self.sharding_attr(attrs, f"result {i}", len(value.shape))
                        for i, (value, attrs) in enumerate(zip(body_ops[-1].operands,
                                                               main.result_attrs))]
    self.hints = propagation.hints(self, body_ops[:-1], [
        (v, None if s is None or s.is_replicated or s.unreduced else s)
        for v, s in zip(body_ops[-1].operands, result_shardings)])
    self.partition_ops(body_ops[:-1])
    ret = body_ops[-1]
    outputs, output_texts = [], []
    for i, (value, s) in enumerate(zip(ret.operands, result_shardings)):
      value = self.pending.get(value, value)
      if s is None and (self.is_sharded(value) or value in self.returned_split) and \
          self.local_of.get(value):
        # An unspecified result comes back as it is held, as XLA's propagation returns it: a
        # shard_map's result under its out_specs (gathering it would change its sharding).
        s = max(self.local_of[value], key=self.shard_count)
      if s is None or s.is_replicated:
        outputs.append(self.whole(value, ret.loc))
        output_texts.append("{replicated}")
        continue
      outputs.append(self.unreduced(value, s, ret.loc, f"result {i} {value.type}") if s.unreduced
                     else self.under(value, s, ret.loc, f"result {i} {value.type}"))
      output_texts.append(s.hlo_text(self.mesh(s, f"result {i}")))
    ret.operands = outputs
    main.body = Block(new_args, self.ops + [ret])
    main.result_types = [v.type for v in outputs]
    module.attrs["trn.core_signature"] = ([a.type for a in new_args], list(main.result_types))
    module.attrs["trn.parameter_shardings"] = param_texts
    module.attrs["trn.output_shardings"] = output_texts
    module.attrs["trn.replicated_ops"] = self.replicated

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
  _Partitioner(_meshes(module, num_cores), num_cores).run(module)


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
