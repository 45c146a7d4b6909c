"""check-supported: reject element types NeuronCores cannot compute with, and ops no lowering
rule is registered for, naming the op.

Requires: nothing (runs on any IR).
Ensures: no value of the entry function is float64 (complex64 is decomposed by decompose-complex,
complex128 rejected at import), but the rank-0 f64 arguments of a program from an HloModuleProto,
which only a convert reads (narrow-float64-scalars); every
op codegen lowers one by one (the entry function's, and those of while/case/if regions) has a
registered lowering rule (whether one accepts its types is decided when it is lowered).
Runs after: fuse-elementwise (last, so the message names the op as lowering will see it).
"""

from __future__ import annotations

from hlo_lowering import lowering  # noqa: F401  (registers every rule)
from hlo_lowering.errors import CompileError, UNIMPLEMENTED
from hlo_lowering.ir import Block, Module, Op, Value, control_flow_blocks, walk_ops
from hlo_lowering.lowering import registry
from hlo_lowering.report import FUSED_OPS
from hlo_lowering.program import DType


# Said to JAX and PyTorch (torch_xla) users alike.
FLOAT64_HINT = ("NeuronCores have no float64 type: use float32 (in JAX: leave jax_enable_x64 off; "
                "in PyTorch: .float())")


def float64_scalar_arguments(module: Module) -> set[Value]:
  """The f64 arguments a program may keep: torch_xla's Python numbers (rank 0, in a program
  from an HloModuleProto), which narrow-float64-scalars leaves to one convert each."""
  if module.source_format != "hlo":
    return set()
  return {a for a in module.main.args if a.dtype == DType.F64 and a.type.rank == 0}


def uses_float64(op: Op, scalar_arguments: set[Value]) -> bool:
  """Whether `op` computes with float64 (a convert of a kept f64 argument only loads it; a
  fusion's float64 is that of an op inside it, which is the one to name)."""
  if op.name in FUSED_OPS:
    return False
  if op.name == "stablehlo.convert" and op.operands[0] in scalar_arguments:
    return op.result.dtype == DType.F64
  return any(v.dtype == DType.F64 for v in op.results + op.operands)


def run(module: Module) -> None:
  main = module.main
  kept = float64_scalar_arguments(module)
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
