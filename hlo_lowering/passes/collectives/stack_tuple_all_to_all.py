"""stack-tuple-all-to-all: HLO's tuple all-to-all becomes StableHLO's array all_to_all.

torch_xla's `xm.all_to_all` sends XLA's tuple form: n operands, one per member of the group, no
split dimension; member j's operand i goes to member i, which returns it as its result j.
hlo_to_stablehlo gives it as `mhlo.all_to_all`. Stacking the operands along a new leading dim
makes that the array form with split_dimension = concat_dimension = 0 and split_count = n: piece
i of member j is its operand i, and member i's result holds member j's piece at position j. Each
result is then that position, unstacked.

Requires: an imported module.
Ensures: no mhlo.all_to_all is left (in any region); each became a reshape per operand, one
concatenate, one stablehlo.all_to_all (the op's replica_groups and channel_handle) and a slice
and reshape per result, with the op's location. Operands of different shapes or dtypes, or
results that are not the operands' shape, are a CompileError naming the op.
Runs before: resolve-collective-groups.
"""

from __future__ import annotations

from hlo_lowering.errors import INVALID_ARGUMENT, CompileError
from hlo_lowering.ir import Module, Op, Value
from hlo_lowering.passes.expansion import Emitter, every_block, expand_ops

_KEPT_ATTRS = ("replica_groups", "channel_handle", "use_global_device_ids")


def _expand(op: Op, e: Emitter) -> list[Value] | None:
  if op.name != "mhlo.all_to_all":
    return None
  n, first = len(op.operands), op.operands[0]
  if any(v.type != first.type for v in list(op.operands) + list(op.results)) or \
      len(op.results) != n:
    raise CompileError(f"{op.describe()}: a tuple all_to_all needs as many results as "
                       "operands, all of one shape and dtype", INVALID_ARGUMENT)
  stacked_shape = (n,) + first.shape
  stacked = e.concatenate([e.reshape(v, (1,) + v.shape) for v in op.operands], 0)
  attrs = {k: op.attrs[k] for k in _KEPT_ATTRS if k in op.attrs}
  exchanged = e.emit("stablehlo.all_to_all", [stacked], stacked_shape, first.dtype,
                     {**attrs, "split_dimension": 0, "concat_dimension": 0, "split_count": n})
  rest = list(first.shape)
  return [e.reshape(e.slice(exchanged, [j] + [0] * len(rest), [j + 1] + rest), first.shape)
          for j in range(n)]


def run(module: Module) -> None:
  expand_ops(module, _expand, blocks=every_block)
