"""stablehlo.optimization_barrier: its results are its operands (no data moves).

This is the worked example of docs/adding-an-op.md; tests/test_compiler_adding_an_op.py checks
that the document shows this file verbatim and that the op compiles and runs.
"""

from __future__ import annotations

from hlo_lowering.ir import Op
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.registry import register_lowering


@register_lowering("stablehlo.optimization_barrier", kind="native")
def lower_optimization_barrier(ctx: LoweringContext, op: Op) -> None:
  for operand, result in zip(op.operands, op.results):
    ctx.set_place(result, ctx.place(operand))
    if ctx.splat(operand) is not None:
      ctx.set_splat(result, ctx.splat(operand))
