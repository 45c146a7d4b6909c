"""Codegen: walks the entry function in order, lowers each op with its registered rule, and
makes the returned values the program's outputs.

Parameters become parameter tensors; a returned value becomes its output tensor directly when
its producer allocates a fresh result (`ctx.new_result`), and is copied into one when it is a
parameter, a constant, a view, or a value returned twice.
"""

from __future__ import annotations

import logging

from hlo_lowering import lowering  # noqa: F401  (registers every rule)
from hlo_lowering.ir import Module, Op
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.registry import find_rule
from hlo_lowering.program import ProgramBuilder
from hlo_lowering.report import CompileReport, LoweredOp

logger = logging.getLogger(__name__)


def _lower_op(ctx: LoweringContext, op: Op, report: CompileReport) -> None:
  ctx.begin_op(op)
  before = len(ctx.builder.instructions)
  if any(r.type.size == 0 for r in op.results) and op.name != "stablehlo.constant":
    for result in op.results:
      ctx.new_result(result)
    kind = "empty"
  else:
    rule = find_rule(op)
    rule.fn(ctx, op)
    kind = rule.kind
    missing = [r for r in op.results if not ctx.has_place(r)]
    if missing:
      raise AssertionError(f"lowering rule for {op.describe()} placed no result for {missing}")
  report.add(LoweredOp(op.name, kind, op.loc.position, op.loc.name,
                       len(ctx.builder.instructions) - before))


def generate(module: Module, target: str, target_spec: dict,
             report: CompileReport) -> ProgramBuilder:
  """The program for `module`'s entry function (after the pass pipeline)."""
  builder = ProgramBuilder(target=target, source=module.source)
  ctx = LoweringContext(builder, target_spec)
  main = module.main
  for i, arg in enumerate(main.args):
    ctx.bind_parameter(arg, i, main.arg_names[i] or f"arg{i}")
  returned = main.returned
  names = [main.result_names[i] or f"out{i}" for i in range(len(returned))]
  for i, value in reversed(list(enumerate(returned))):
    ctx.plan_output(value, i, names[i])  # reversed: a value returned twice writes its first
  for op in main.body.ops[:-1]:
    _lower_op(ctx, op, report)
  ctx.begin_op(main.body.terminator)
  for i, value in enumerate(returned):
    ctx.finish_output(value, i, names[i])
  return builder
