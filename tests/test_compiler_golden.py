"""Golden snapshot of the instruction stream of one small program: a refactor of the compiler
must show zero diff here, or a deliberate one (rerun with TRN_UPDATE_GOLDEN=1 and review it)."""

import os
import pathlib

import compiler_harness as harness
from hlo_lowering.program import disassemble
from jax_trn import compilation

GOLDEN = pathlib.Path(__file__).parent / "golden" / "compiler_small_program.txt"

# tanh(x) * y + 1 over 300 elements, one trn.fusion: a [128, 2] tile plus a 44-partition
# remainder, x and y loaded once per tile, ScalarE for tanh, VectorE for the multiply and for the
# add with a splat immediate (the broadcast never copied), intermediates kept in SBUF, one store.
PROGRAM = """
func.func public @main(%x: tensor<300xf32>, %y: tensor<300xf32>) -> tensor<300xf32> {
  %0 = stablehlo.tanh %x : tensor<300xf32> loc("jit(f)/tanh"("f.py":2:10))
  %1 = stablehlo.multiply %0, %y : tensor<300xf32> loc("jit(f)/mul"("f.py":2:20))
  %c = stablehlo.constant dense<1.0> : tensor<f32> loc("jit(f)"("f.py":2:30))
  %b = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<300xf32> loc("jit(f)/add"("f.py":2:30))
  %2 = stablehlo.add %1, %b : tensor<300xf32> loc("jit(f)/add"("f.py":2:30))
  return %2 : tensor<300xf32>
}
"""


def test_small_program_matches_golden():
  harness.native()
  actual = disassemble(compilation.compile_text(PROGRAM))
  if os.environ.get("TRN_UPDATE_GOLDEN"):
    GOLDEN.write_text(actual)
  assert actual == GOLDEN.read_text()
