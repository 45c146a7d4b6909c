"""The @trn_kernel custom call rule: a traced kernel's payload survives its text form, lowers
in place of the call, and a payload that is missing, malformed or does not match the call's
types is a CompileError naming the call."""

import numpy as np
import pytest

from hlo_lowering.errors import CompileError
from hlo_lowering.program import DType, HbmAP, Memory, Scalar, TileAP
from hlo_lowering.program.kernel_program import (CONSTANT, INPUT, OUTPUT, KernelInstruction,
                                                  KernelProgram, KernelTensor)
from hlo_lowering.lowering.kernel_call import digest_target
from jax_trn import _native, compilation

pytest.importorskip("jax_trn._native", reason="jax_trn._native is not built", exc_type=ImportError)

F4 = "tensor<4xf32>"


def _copy_kernel(dtype=DType.F32) -> KernelProgram:
  """Input -> SBUF -> scaled by 2 on VectorE -> output (and a constant, for the text form)."""
  tile = TileAP.dense(Memory.SBUF, dtype, 0, 1, 0, (4,))
  return KernelProgram(
      "double", [KernelTensor(INPUT, 0, dtype, (4,)), KernelTensor(OUTPUT, 0, dtype, (4,)),
                 KernelTensor(CONSTANT, 0, DType.F32, (1,), "c", np.ones(1, np.float32).tobytes())],
      [KernelInstruction("dma_copy", {"dst": tile, "src": HbmAP(0, 0, ((4, 1), (1, 4)))}, 0),
       KernelInstruction("tensor_scalar", {"op": 34, "dst": tile, "src": tile,
                                           "scalar": Scalar(DType.F32, 2.0), "reverse": False}, 1),
       KernelInstruction("dma_copy", {"dst": HbmAP(1, 0, ((4, 1), (1, 4))), "src": tile}, 0)],
      ["k.py:1", "k.py:2"], sbuf_bytes=64)


def _call(payload: str, types: str = F4, target: str = "trn_kernel") -> str:
  """A program calling the kernel `payload` on its f32[4] argument."""
  return (f"func.func @main(%a: {types}) -> ({types}) {{\n"
          f"%0 = \"stablehlo.custom_call\"(%a) {{call_target_name = \"{target}\", "
          f"mhlo.backend_config = {{kernel = \"{payload}\"}}}} : ({types}) -> {types}\n"
          f"return %0 : {types}\n}}")


def test_payload_round_trips_through_its_text_form():
  kernel = _copy_kernel()
  again = KernelProgram.decode(kernel.encode())
  assert again == kernel


def test_kernel_call_lowers_in_place_and_runs():
  program = compilation.compile_text(_call(_copy_kernel().encode()))
  (out,), _ = _native.run_program(program, [np.arange(4, dtype=np.float32)])
  np.testing.assert_array_equal(out, 2 * np.arange(4, dtype=np.float32))


def test_target_named_after_its_kernel_lowers_and_a_mismatched_digest_is_refused():
  payload = _copy_kernel().encode()
  program = compilation.compile_text(_call(payload, target=digest_target(payload)))
  (out,), _ = _native.run_program(program, [np.arange(4, dtype=np.float32)])
  np.testing.assert_array_equal(out, 2 * np.arange(4, dtype=np.float32))
  other = digest_target(_copy_kernel(DType.BF16).encode())
  with pytest.raises(CompileError, match="digest does not match the kernel it carries"):
    compilation.compile_text(_call(payload, target=other))


@pytest.mark.parametrize("payload,message", [
    ("bm90IGEga2VybmVs", "custom_call @trn_kernel at"),
    ("bm90IGEga2VybmVs", "not a jax_trn kernel payload"),
    (_copy_kernel(DType.BF16).encode(), "kernel double at"),
    (_copy_kernel(DType.BF16).encode(), "its inputs are ['bf16[4]'] but the call has ['f32[4]']"),
])
def test_bad_payload_is_a_compile_error_naming_the_call(payload, message):
  with pytest.raises(CompileError) as error:
    compilation.compile_text(_call(payload))
  assert message in str(error.value)
