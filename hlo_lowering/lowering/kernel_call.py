"""stablehlo.custom_call @trn_kernel: a kernel traced by jax_trn.nki, lowered to its own
instructions in place of the call.

The call's backend_config carries the traced kernel (program/kernel_program.py). Its inputs are
the call's operands (made dense in HBM), its outputs the call's results; its SBUF/PSUM arenas
are placed by plan-memory and its DMAs queued and synchronised by the back end like any rule's.
Each instruction's debug entry names the kernel's own source line, so profiles and loader
errors point into the kernel. A kernel launched over both cores of an LNC=2 device (a grid,
jax_trn/nki/cores.py) runs each core's programs on that physical core when the target has two.
"""

from __future__ import annotations

import hashlib

from hlo_lowering.errors import CompileError, INVALID_ARGUMENT
from hlo_lowering.ir import Op
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.core_split import physical_cores
from hlo_lowering.lowering.registry import register_lowering
from hlo_lowering.program.kernel_program import INPUT, OUTPUT, KernelProgram

KERNEL_TARGET = "trn_kernel"
RULE_NAME = "kernel_call.lower_kernel_call"


def digest_target(payload: str) -> str:
  """trn_kernel.<digest of the payload>: the call target torch_xla's calls use. torch_xla keys
  its cache of compiled graphs on a custom call's target name, not its backend_config, so two
  kernels with the same shapes under one name would share one compiled graph."""
  return f"{KERNEL_TARGET}.{hashlib.sha256(payload.encode()).hexdigest()[:16]}"


def _is_kernel_call(op: Op) -> bool:
  """call_target_name trn_kernel (or trn_kernel.<digest>): a kernel traced by jax_trn.nki"""
  target = op.attrs.get("call_target_name")
  return isinstance(target, str) and (target == KERNEL_TARGET
                                      or target.startswith(KERNEL_TARGET + "."))


def _payload(op: Op) -> str:
  """JAX's ffi_call puts the payload in mhlo.backend_config's `kernel`; torch_xla's custom call
  (an HLO proto) in the plain backend_config string."""
  config = op.attrs.get("mhlo.backend_config")
  if isinstance(config, dict) and isinstance(config.get("kernel"), str):
    return config["kernel"]
  if isinstance(op.attrs.get("backend_config"), str) and op.attrs["backend_config"]:
    return op.attrs["backend_config"]
  raise CompileError(f"custom_call @{KERNEL_TARGET} at {op.loc} carries no traced kernel "
                     "(call kernels through jax_trn.nki.jit)", INVALID_ARGUMENT)


def _check_signature(op: Op, kernel: KernelProgram) -> None:
  for kind, values in ((INPUT, op.operands), (OUTPUT, op.results)):
    declared = [t for _, t in kernel.of_kind(kind)]
    got = [(v.dtype, tuple(v.shape)) for v in values]
    want = [(t.dtype, tuple(t.shape)) for t in declared]
    if got != want:
      raise CompileError(
          f"kernel {kernel.name} at {op.loc}: its {kind}s are "
          f"{[f'{d.name.lower()}{list(s)}' for d, s in want]} but the call has "
          f"{[f'{d.name.lower()}{list(s)}' for d, s in got]}", INVALID_ARGUMENT)


@register_lowering("stablehlo.custom_call", when=_is_kernel_call)
def lower_kernel_call(ctx: LoweringContext, op: Op) -> None:
  payload = _payload(op)
  target = op.attrs["call_target_name"]
  if target != KERNEL_TARGET and target != digest_target(payload):
    raise CompileError(f"custom_call @{target} at {op.loc}: the target's digest does not match "
                       "the kernel it carries", INVALID_ARGUMENT)
  try:
    kernel = KernelProgram.decode(payload)
  except ValueError as e:
    raise CompileError(f"custom_call @{KERNEL_TARGET} at {op.loc}: {e}", INVALID_ARGUMENT) from None
  _check_signature(op, kernel)
  inputs = [(place.tensor, place.offset) for place in map(ctx.dense_place, op.operands)]
  outputs = [(place.tensor, place.offset) for place in map(ctx.new_result, op.results)]
  debug_ids: dict[str, int] = {}

  def debug_for_line(position: str) -> int:
    if position not in debug_ids:
      debug_ids[position] = ctx.builder.debug(
          op=op.name, name=f"{op.loc.name or 'kernel'}/{kernel.name}",
          location=position or op.loc.position, lowering="native", rule=RULE_NAME)
    return debug_ids[position]

  kernel.emit(ctx.builder, inputs, outputs, debug_for_line, physical_cores(ctx))
