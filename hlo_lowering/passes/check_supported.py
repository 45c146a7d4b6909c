"""check-supported: reject element types NeuronCores cannot compute with, naming the op.

Requires: nothing (runs on any IR).
Ensures: no value of the entry function is float64 (complex types are rejected at import).
Runs after: normalize-dot-general (last, so the message names the op as lowering will see it).
"""

from __future__ import annotations

from hlo_lowering.errors import CompileError, UNIMPLEMENTED
from hlo_lowering.ir import Module, walk_ops
from hlo_lowering.program import DType


# Said to JAX and PyTorch (torch_xla) users alike.
FLOAT64_HINT = ("NeuronCores have no float64 type: use float32 (in JAX: leave jax_enable_x64 off; "
                "in PyTorch: .float())")


def run(module: Module) -> None:
  main = module.main
  for i, arg in enumerate(main.args):
    if arg.dtype == DType.F64:
      raise CompileError(f"argument {i} of the program is float64 {list(arg.shape)}: "
                         f"{FLOAT64_HINT}", UNIMPLEMENTED)
  for op in walk_ops(main.body):
    if any(v.dtype == DType.F64 for v in op.results + op.operands):
      raise CompileError(f"{op.describe()} uses float64: {FLOAT64_HINT}", UNIMPLEMENTED)
