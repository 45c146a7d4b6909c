"""check-supported: reject element types NeuronCores cannot compute with, and ops no lowering
rule is registered for, naming the op.

Requires: nothing (runs on any IR).
Ensures: no value of the entry function is float64 (complex64 is decomposed by decompose-complex,
complex128 rejected at import), but the boundary values narrow-float64 leaves (f64 arguments
only a convert to f32 reads, f64 results a convert from f32 makes); every
op codegen lowers one by one (the entry function's, and those of while/case/if regions) has a
registered lowering rule (whether one accepts its types is decided when it is lowered).
Runs after: fuse-elementwise (last, so the message names the op as lowering will see it).
"""

from __future__ import annotations

from hlo_lowering import lowering  # noqa: F401  (registers every rule)
from hlo_lowering.errors import CompileError, UNIMPLEMENTED
from hlo_lowering.ir import Block, Module, Op, Value, control_flow_blocks, walk_ops
from hlo_lowering.lowering import registry
from hlo_lowering.passes.narrow_float64 import FLOAT64_HINT, float64_boundary
from hlo_lowering.report import FUSED_OPS
from hlo_lowering.program import DType


def uses_float64(op: Op, boundary: set[Value]) -> bool:
  """Whether `op` computes with float64 (a convert or return of float64 boundary values only
  loads, stores or returns them; a fusion's float64 is that of an op inside it, which is the one
  to name)."""
  if op.name in FUSED_OPS:
    return False
  f64 = [v for v in op.results + op.operands if v.dtype == DType.F64]
  if op.name in ("stablehlo.convert", "func.return"):
    return any(v not in boundary for v in f64)
  return bool(f64)


def run(module: Module) -> None:
  main = module.main
  kept = float64_boundary(module)
  for i, arg in enumerate(main.args):
    if arg.dtype == DType.F64 and arg not in kept:
      raise CompileError(f"argument {i} of the program is float64 {list(arg.shape)}: "
                         f"{FLOAT64_HINT}", UNIMPLEMENTED)
  for op in walk_ops(main.body):
    if uses_float64(op, kept):
      raise CompileError(f"{op.describe()} uses float64: {FLOAT64_HINT}", UNIMPLEMENTED)
  for op in lowered_ops(main.body):
    if not registry.rules_for(op.name):
      raise registry.unsupported_op_error(op)


def lowered_ops(body: Block) -> list[Op]:
  """The ops codegen lowers one by one with a rule: those of `body` and of the regions of its
  control-flow ops (reduce and sort bodies are matched whole by their op's rule; terminators
  are not lowered)."""
  return [op for block in control_flow_blocks(body) for op in block.ops[:-1]]
