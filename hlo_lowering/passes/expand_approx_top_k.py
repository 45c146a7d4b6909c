"""expand-approx-top-k: `lax.approx_max_k` / `approx_min_k` as JAX lowers them for every platform
but TPU — `custom_call @ApproxTopK` with `is_fallback` and `aggregate_to_topk` — become what
XLA's CPU backend runs for that call: a sort of its operands (the values and an iota of indices)
along `reduction_dim` by the call's comparator, and the first `top_k` of each sorted operand
along that dim. The result is the exact top k, so it meets any recall target.

Requires: nothing (it runs first: the comparator is a function of the module, which inline-calls
drops).
Ensures: no custom_call @ApproxTopK is left (also inside regions); each becomes one
stablehlo.sort (comparator: the called function's body) and one stablehlo.slice per result,
with the call's location; a call not in the fallback form, or whose comparator the module does
not define, is a CompileError naming the call.
Runs before: inline-calls.
"""

from __future__ import annotations

from hlo_lowering.errors import CompileError, INVALID_ARGUMENT, UNIMPLEMENTED
from hlo_lowering.ir import Block, Module, Op, Region, clone_block, replace_uses

TARGET = "ApproxTopK"


def _config(op: Op) -> dict:
  config = op.attrs.get("mhlo.backend_config") or {}
  if not isinstance(config, dict) or not config.get("is_fallback") or \
      not config.get("aggregate_to_topk", True):
    raise CompileError(f"{op.describe()}: custom_call @{TARGET} other than JAX's fallback form "
                       "(is_fallback, aggregate_to_topk) is not supported", UNIMPLEMENTED)
  return config


def _comparator(op: Op, module: Module) -> Block:
  names = op.attrs.get("called_computations") or []
  function = module.functions.get(names[0]) if len(names) == 1 else None
  if function is None:
    raise CompileError(f"{op.describe()}: custom_call @{TARGET} calls comparator {names}, which "
                       "the module does not define", INVALID_ARGUMENT)
  block = clone_block(function.body, {})
  block.ops[-1] = Op("stablehlo.return", block.ops[-1].operands, [], loc=block.ops[-1].loc)
  return block


def _expand(op: Op, module: Module) -> list[Op]:
  config = _config(op)
  n = len(op.results)
  operands, dim = op.operands[:n], int(config["reduction_dim"]) % op.operands[0].type.rank
  sort = Op("stablehlo.sort", operands, [v.type for v in operands],
            {"dimension": dim, "is_stable": False}, [Region(_comparator(op, module))], op.loc)
  new_ops = [sort]
  for sorted_value, result in zip(sort.results, op.results):
    limit = list(sorted_value.shape)
    limit[dim] = result.shape[dim]
    if list(result.shape) != limit:
      raise CompileError(f"{op.describe()}: result {result.type} is not the top "
                         f"{result.shape[dim]} along dim {dim}", INVALID_ARGUMENT)
    new_ops.append(Op("stablehlo.slice", [sorted_value], [result.type],
                      {"start_indices": [0] * len(limit), "limit_indices": limit,
                       "strides": [1] * len(limit)}, loc=op.loc))
  return new_ops


def _rewrite(block: Block, module: Module, replaced: dict) -> None:
  new_ops: list[Op] = []
  for op in block.ops:
    for region in op.regions:
      _rewrite(region.block, module, replaced)
    if op.name == "stablehlo.custom_call" and op.attrs.get("call_target_name") == TARGET:
      expanded = _expand(op, module)
      new_ops.extend(expanded)
      replaced.update(zip(op.results, (s.result for s in expanded[1:])))
    else:
      new_ops.append(op)
  block.ops = new_ops


def run(module: Module) -> None:
  for function in list(module.functions.values()):
    replaced: dict = {}
    _rewrite(function.body, module, replaced)
    replace_uses(function.body, replaced)
