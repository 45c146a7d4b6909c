"""decompose-approx-top-k: JAX's `custom_call @ApproxTopK` (lax.approx_max_k / approx_min_k) with
`is_fallback = true`, which JAX emits for every platform but TPU, becomes what XLA's
ApproxTopKFallback builds for it: a sort of the operands (the values and JAX's iota of indices)
along `reduction_dim` with the call's comparator, then each sorted operand sliced to the call's
result size along that dim (`top_k`, or with `aggregate_to_topk = false` the size XLA chose). So
the results are the exact top k, as on JAX's CPU backend. The sort is stable (ties keep index
order; XLA's fallback sort is unstable, so among equal values the CPU may pick other indices).

Requires: an imported module (the comparator is still a function of the module: this pass runs
before inline-calls, which removes every function but the entry).
Ensures: no custom_call @ApproxTopK is left (in any region: shard_map bodies too); each became
one stablehlo.sort (its comparator the called function's body) and a stablehlo.slice per result
narrower than its operand, with the call's location. A call without `is_fallback` (TPU's
approximate algorithm) or whose shapes are not the fallback's is a CompileError naming the call.
Runs before: inline-calls (first pass).
"""

from __future__ import annotations

from hlo_lowering.errors import INVALID_ARGUMENT, UNIMPLEMENTED, CompileError
from hlo_lowering.ir import Block, Module, Op, Region, Value, clone_op
from hlo_lowering.passes.expansion import Emitter, every_block, expand_ops

TARGET = "ApproxTopK"


def _comparator(module: Module, op: Op) -> Block:
  """The called comparator's body as a sort region (its func.return a stablehlo.return)."""
  names = op.attrs.get("called_computations") or []
  if len(names) != 1 or names[0] not in module.functions:
    raise CompileError(f"{op.describe()}: ApproxTopK needs one comparator function, got "
                       f"{names!r}", INVALID_ARGUMENT)
  function = module.functions[names[0]]
  mapping: dict[Value, Value] = {}
  args = [Value(a.type) for a in function.args]
  mapping.update(zip(function.args, args))
  ops = [clone_op(o, mapping) for o in function.body.ops]
  ops[-1].name = "stablehlo.return"
  return Block(args, ops)


def _expand(module: Module, op: Op, e: Emitter) -> list[Value] | None:
  if op.name != "stablehlo.custom_call" or op.attrs.get("call_target_name") != TARGET:
    return None
  config = op.attrs.get("mhlo.backend_config") or {}
  if not config.get("is_fallback"):
    raise CompileError(f"{op.describe()}: ApproxTopK without is_fallback is TPU's approximate "
                       "algorithm, which NeuronCores do not run (JAX emits the fallback form "
                       "for every other platform)", UNIMPLEMENTED)
  n = len(op.results)
  inputs, dim = op.operands[:n], int(config["reduction_dim"])
  if len(op.operands) != 2 * n or any(
      r.dtype != v.dtype or r.type.rank != v.type.rank or r.shape[dim] > v.shape[dim]
      or any(a != b for k, (a, b) in enumerate(zip(r.shape, v.shape)) if k != dim)
      for r, v in zip(op.results, inputs)):
    raise CompileError(f"{op.describe()}: ApproxTopK's operands (inputs, then their init "
                       "values) and results do not have the fallback's shapes", INVALID_ARGUMENT)
  sort = Op("stablehlo.sort", list(inputs), [v.type for v in inputs],
            {"dimension": dim, "is_stable": True}, [Region(_comparator(module, op))], op.loc)
  e.new_ops.append(sort)
  return [e.slice(v, [0] * r.type.rank, list(r.shape)) if r.shape != v.shape else v
          for r, v in zip(op.results, sort.results)]


def run(module: Module) -> None:
  expand_ops(module, lambda op, e: _expand(module, op, e), blocks=every_block)
