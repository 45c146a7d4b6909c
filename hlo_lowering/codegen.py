"""Codegen: walks the entry function in order, lowers each op with its registered rule, and
makes the returned values the program's outputs.

Parameters become parameter tensors; a returned value becomes its output tensor directly when
its producer allocates a fresh result (`ctx.new_result`), and is copied into one when it is a
parameter, a constant, a view, or a value returned twice. A value returned through reshapes
(a 2-D matmul is a 3-D batch matmul reshaped) has its producer write the output tensor and the
reshapes view it, since a reshape of dense data is an alias.
"""

from __future__ import annotations

import logging

from hlo_lowering import lowering  # noqa: F401  (registers every rule)
from hlo_lowering.ir import Module, Op, Value, walk_ops
from hlo_lowering.lowering import in_place
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.registry import find_rule
from hlo_lowering.program import ProgramBuilder
from hlo_lowering.report import CompileReport

logger = logging.getLogger(__name__)


# Ops whose regions run (a zero-size result does not make them empty).
_CONTROL_FLOW = frozenset({"stablehlo.while", "stablehlo.case", "stablehlo.if"})


def _lower_op(ctx: LoweringContext, op: Op, report: CompileReport) -> None:
  ctx.begin_op(op)
  # The debug entry of this op's instructions also says how it was lowered (the profiler reads it).
  debug = ctx.builder.debug_entries[ctx.debug_id]
  before = len(ctx.builder.instructions)
  # Only when every result is zero-size: an op with one empty result and others that are not
  # (rng_bit_generator's bits and its new state) must still write those others.
  # A side effect (a host callback returning only a token) runs whatever its results hold.
  if (op.results and all(r.type.size == 0 for r in op.results)
      and op.name != "stablehlo.constant" and op.name not in _CONTROL_FLOW
      and not op.attrs.get("has_side_effect")):
    for result in op.results:
      ctx.new_result(result)
    kind = "empty"
    debug.lowering = kind
  else:
    rule = find_rule(op, ctx)
    debug.lowering, debug.rule = rule.kind, rule.name
    rule.fn(ctx, op)
    kind = rule.kind
    missing = [r for r in op.results if not ctx.has_place(r)]
    if missing:
      raise AssertionError(f"lowering rule for {op.describe()} placed no result for {missing}")
  report.add_op(op, kind, len(ctx.builder.instructions) - before)


def _users(ops: list[Op]) -> dict[Value, list[Op]]:
  users: dict[Value, list[Op]] = {}
  for op in ops:
    for nested in [op, *(o for r in op.regions for o in walk_ops(r.block))]:
      for operand in nested.operands:
        users.setdefault(operand, []).append(nested)
  return users


def _plan_outputs(ctx: LoweringContext, ops: list[Op], returned: list[Value],
                  names: list[str]) -> None:
  producers = {result: op for op in ops for result in op.results}
  for i, value in reversed(list(enumerate(returned))):  # reversed: a value returned twice
    ctx.plan_output(value, i, names[i])                   # writes its first output
  for i, value in reversed(list(enumerate(returned))):
    # Through reshapes: the producer of the reshaped value writes the output tensor itself.
    # Not for a zero-size value: every op in the chain is "empty" and takes a fresh result,
    # so the output would be allocated twice (once for the producer, once for the reshape).
    if value.type.size == 0:
      continue
    source = producers.get(value)
    while source is not None and source.name == "stablehlo.reshape":
      operand = source.operands[0]
      if ctx.output_planned(operand):
        break
      ctx.plan_output(operand, i, names[i], shape=value.shape)
      source = producers.get(operand)


def generate(module: Module, target: str, target_spec: dict,
             report: CompileReport) -> ProgramBuilder:
  """The program for `module`'s entry function (after the pass pipeline)."""
  builder = ProgramBuilder(target=target, source=module.source)
  main = module.main
  ctx = LoweringContext(builder, target_spec, _users(main.body.ops))

  def lower_ops(ops: list[Op]) -> None:
    for op in ops:
      _lower_op(ctx, op, report)
  ctx.lower_ops = lower_ops
  ctx.complex_outputs = set(main.complex_results)
  ctx.nibble_outputs = set(main.nibble_results)
  for i, arg in enumerate(main.args):
    ctx.bind_parameter(arg, i, main.arg_names[i] or f"arg{i}", i in main.complex_args,
                       i in main.nibble_args)
  builder.output_aliases = dict(main.output_aliases)
  returned = main.returned
  names = [main.result_names[i] or f"out{i}" for i in range(len(returned))]
  _plan_outputs(ctx, main.body.ops, returned, names)
  in_place.plan(ctx, main.body.ops)
  for op in main.body.ops[:-1]:
    _lower_op(ctx, op, report)
  ctx.begin_op(main.body.terminator)
  for i, value in enumerate(returned):
    ctx.finish_output(value, i, names[i])
  return builder
