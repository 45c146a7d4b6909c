"""expand-truth-reduce: a reduce whose body is "either / both of its arguments are non-zero, as
1 or 0" becomes a bool reduce of `x != 0`, turned back into 1 or 0.

torch_xla lowers `torch.any` / `torch.all` of a float or integer tensor (aten.any on f32, f16,
s32...) as a reduce over the tensor itself with the body
`select(compare(a, 0, NE) or compare(b, 0, NE), 1, 0)` (and for all), init 0 (1 for all). Every
partial result is then 0 or 1, so the reduce equals `select(reduce_or(x != 0, init != 0), 1, 0)`,
which the bool reduce lowers (canonicalize names its reducer). Only a constant init of 0 or 1 is
taken, so that a reduce over no elements (the init) is the same 0 or 1.

Requires: calls inlined (inline-calls).
Ensures: no single-input reduce with such a body and a constant 0/1 init is left (in the entry
function and in while/case/if regions); the new ops keep the reduce's location.
Runs after: inline-calls, before canonicalize (which names the new bool reduce's reducer).
"""

from __future__ import annotations

import numpy as np

from hlo_lowering.ir import Block, Module, Op, Region, TensorType, Value
from hlo_lowering.passes.expansion import Emitter, expand_ops
from hlo_lowering.program import DType

_COMBINES = ("stablehlo.or", "stablehlo.and")


def _is_constant(block: Block, value: Value, outer: dict[Value, np.ndarray], number) -> bool:
  """Whether `value` is a one-element constant equal to `number` (of the body or outside it)."""
  known = {op.result: op.attrs["value"] for op in block.ops if op.name == "stablehlo.constant"}
  constant = known.get(value, outer.get(value))
  return constant is not None and constant.size == 1 and constant.flat[0] == number


def truth_combine(op: Op, outer: dict[Value, np.ndarray] | None = None) -> str | None:
  """"stablehlo.or" / "stablehlo.and" when `op` is a one-input reduce with the body above."""
  outer = outer or {}
  if op.name != "stablehlo.reduce" or len(op.operands) != 2 or len(op.regions) != 1:
    return None
  block = op.regions[0].block
  if len(block.args) != 2 or block.args[0].dtype == DType.PRED:
    return None
  compute = [o for o in block.ops[:-1] if o.name != "stablehlo.constant"]
  if len(compute) != 4:
    return None
  *compares, combine, select = compute
  if not all(c.name == "stablehlo.compare" and c.attrs.get("comparison_direction") == "NE"
             and _is_constant(block, c.operands[1], outer, 0) for c in compares):
    return None
  if {c.operands[0] for c in compares} != set(block.args):
    return None
  if combine.name not in _COMBINES or set(combine.operands) != {c.result for c in compares}:
    return None
  if (select.name != "stablehlo.select" or select.operands[0] is not combine.result
      or not _is_constant(block, select.operands[1], outer, 1)
      or not _is_constant(block, select.operands[2], outer, 0)
      or block.terminator.operands != [select.result]):
    return None
  return combine.name


def _expand(op: Op, e: Emitter, constants: dict[Value, np.ndarray]) -> list[Value] | None:
  combine = truth_combine(op, constants)
  init = constants.get(op.operands[1])
  if combine is None or init is None or init.size != 1 or init.flat[0] not in (0, 1):
    return None
  x, init_value = op.operands
  dtype, result = x.dtype, op.result
  kind = "FLOAT" if dtype.is_float else "SIGNED" if dtype.is_signed_int else "UNSIGNED"
  truthy = e.compare("NE", x, e.splat(0, dtype, x.shape), kind)
  init_truthy = e.compare("NE", init_value, e.splat(0, dtype, ()), kind)
  a, b = Value(TensorType((), DType.PRED)), Value(TensorType((), DType.PRED))
  combined = Op(combine, [a, b], [TensorType((), DType.PRED)], loc=op.loc)
  body = Block([a, b], [combined, Op("stablehlo.return", [combined.result], [], loc=op.loc)])
  reduced = Op("stablehlo.reduce", [truthy, init_truthy], [TensorType(result.shape, DType.PRED)],
               {"dimensions": list(op.attrs["dimensions"])}, [Region(body)], op.loc)
  e.new_ops.append(reduced)
  return [e.select(reduced.result, e.splat(1, dtype, result.shape),
                   e.splat(0, dtype, result.shape))]


def run(module: Module) -> None:
  constants: dict[Value, np.ndarray] = {}

  def expand(op: Op, e: Emitter) -> list[Value] | None:
    if op.name == "stablehlo.constant":
      constants[op.result] = op.attrs["value"]
      return None
    return _expand(op, e, constants) if op.name == "stablehlo.reduce" else None

  expand_ops(module, expand)
