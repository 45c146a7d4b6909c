"""inline-calls: replace every func.call, and every stablehlo.composite, with the body of its callee.

A composite (JAX wraps e.g. `chlo.erf` in one) is a named op whose meaning is its decomposition
function; with no specialised lowering for any composite yet, every one is inlined.

Requires: an imported module (importer.import_module); calls form no cycle.
Ensures: the entry function contains no func.call or stablehlo.composite, and the module holds
only the entry function.
Inlined ops without a source position of their own take the call's location, so JAX's private
helpers (`_where`, `relu`, `threefry2x32`) still point at the user's line.
Runs after: decompose-approx-top-k (the first pass; it needs the comparator functions this one
removes).
"""

from __future__ import annotations

from hlo_lowering.errors import CompileError, INVALID_ARGUMENT
from hlo_lowering.ir import (Block, Function, Location, Module, Op, Value, clone_op,
                             replace_uses)

_MAX_DEPTH = 64
# The callee attribute of each calling op.
_CALLEE_ATTRIBUTE = {"func.call": "callee", "stablehlo.composite": "decomposition"}


def _inline_block(block: Block, module: Module, depth: int) -> None:
  new_ops: list[Op] = []
  replaced: dict[Value, Value] = {}
  for op in block.ops:
    op.operands = [replaced.get(v, v) for v in op.operands]
    for region in op.regions:
      _inline_block(region.block, module, depth)
    if op.name not in _CALLEE_ATTRIBUTE:
      new_ops.append(op)
      continue
    callee = _callee(op, module, depth)
    mapping: dict[Value, Value] = dict(zip(callee.args, op.operands))
    for callee_op in callee.body.ops[:-1]:
      copy = clone_op(callee_op, mapping)
      _set_location(copy, op.loc)
      new_ops.append(copy)
    returned = [mapping.get(v, v) for v in callee.returned]
    replaced.update(zip(op.results, returned))
  block.ops = new_ops
  # Uses inside nested regions (a while body using a call's result) are rewritten here.
  replace_uses(block, replaced)


def _set_location(op: Op, call_loc: Location) -> None:
  if not op.loc.file:
    op.loc = Location(op.loc.name or call_loc.name, call_loc.file, call_loc.line, call_loc.col)
  for region in op.regions:
    for inner in region.block.ops:
      _set_location(inner, call_loc)


def _callee(call: Op, module: Module, depth: int) -> Function:
  name = call.attrs.get(_CALLEE_ATTRIBUTE[call.name], "")
  if name not in module.functions:
    raise CompileError(f"{call.name} at {call.loc} calls @{name}, which the module does not "
                       "define", INVALID_ARGUMENT)
  if depth >= _MAX_DEPTH:
    raise CompileError(f"{call.name} at {call.loc}: calls nest deeper than {_MAX_DEPTH} "
                       "(recursive functions are not supported)", INVALID_ARGUMENT)
  callee = module.functions[name]
  _inline_block(callee.body, module, depth + 1)
  return callee


def run(module: Module) -> None:
  main = module.main
  _inline_block(main.body, module, 0)
  module.functions = {main.name: main}
