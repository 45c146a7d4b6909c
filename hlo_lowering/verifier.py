"""IR invariants checked between passes when TRN_VERIFY_IR=1 (tinygrad's SPEC=1 habit).

Checks: every operand is defined before use (in its block or an enclosing one), every value is
defined once, the entry function's returned values match its result types, and op-specific
shape rules for the ops the lowerings rely on (elementwise operand shapes, dot_general in
batch-matmul form after normalize-dot-general).
"""

from __future__ import annotations

from hlo_lowering.ir import Block, Module, Op, Value

_ELEMENTWISE_SAME_SHAPE = frozenset({
    "stablehlo.add", "stablehlo.subtract", "stablehlo.multiply", "stablehlo.divide",
    "stablehlo.maximum", "stablehlo.minimum", "stablehlo.and", "stablehlo.or", "stablehlo.xor",
    "stablehlo.power", "stablehlo.remainder", "stablehlo.compare", "stablehlo.atan2",
})


class IRVerificationError(AssertionError):
  """The IR broke an invariant: a compiler bug in the pass named in the message."""


def _check_op(op: Op, where: str) -> None:
  if op.name in _ELEMENTWISE_SAME_SHAPE:
    shapes = {v.shape for v in op.operands} | {r.shape for r in op.results}
    if len(shapes) != 1:
      raise IRVerificationError(f"{where}: {op.describe()} mixes shapes {sorted(shapes)}")


def _check_block(block: Block, defined: set[Value], where: str) -> None:
  for arg in block.args:
    if arg in defined:
      raise IRVerificationError(f"{where}: block argument {arg} defined twice")
    defined.add(arg)
  for op in block.ops:
    for v in op.operands:
      if v not in defined:
        raise IRVerificationError(f"{where}: {op.describe()} uses {v} before its definition")
    for region in op.regions:
      _check_block(region.block, set(defined), where)
    for r in op.results:
      if r in defined:
        raise IRVerificationError(f"{where}: {op.describe()} redefines {r}")
      defined.add(r)
    _check_op(op, where)


def verify_module(module: Module, after_pass: str) -> None:
  where = f"IR after pass '{after_pass}'"
  for function in module.functions.values():
    _check_block(function.body, set(), f"{where}, function @{function.name}")
  main = module.main
  returned = [v.type for v in main.returned]
  if returned != main.result_types:
    raise IRVerificationError(f"{where}: @{main.name} returns {returned}, declared "
                              f"{main.result_types}")
