"""stablehlo.custom_call @trn_host_callback: a Python callable JAX lowered into the program
(jax.debug.print / debug.callback, jax.pure_callback, io_callback), lowered to one
`host_callback` instruction.

jax_trn/host_callbacks.py emits the call: its `mhlo.backend_config` holds `callback`, the key the
plugin's registry knows the callable by. The instruction reads the call's operands from HBM
(dense) and writes its results; zero-size values (tokens, empty arrays) are left out of it, the
host side fills them in. Tokens (`!stablehlo.token`) are imported as zero-size pred[0] values
(attributes.tensor_type), `after_all`/`create_token` as empty constants (importer.py): they
order the callbacks through the data dependence they carry, and every host_callback of a core
runs on POOL in program order (docs/host-callbacks.md).
"""

from __future__ import annotations

from hlo_lowering.errors import CompileError, INVALID_ARGUMENT
from hlo_lowering.ir import Op
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.registry import register_lowering

HOST_CALLBACK_TARGET = "trn_host_callback"


def is_host_callback(op: Op) -> bool:
  """call_target_name trn_host_callback: a Python callback the host runs (host_callback)"""
  return op.name == "stablehlo.custom_call" and op.attrs.get("call_target_name") == HOST_CALLBACK_TARGET


def _callback_key(op: Op) -> int:
  config = op.attrs.get("mhlo.backend_config")
  key = config.get("callback") if isinstance(config, dict) else None
  if not isinstance(key, int) or not 0 <= key < 2**64:
    raise CompileError(f"custom_call @{HOST_CALLBACK_TARGET} at {op.loc} carries no callback key "
                       "(host callbacks are lowered by jax_trn.host_callbacks)", INVALID_ARGUMENT)
  return key


@register_lowering("stablehlo.custom_call", when=is_host_callback)
def lower_host_callback(ctx: LoweringContext, op: Op) -> None:
  key = _callback_key(op)
  srcs = [ctx.dense_place(v).ap() for v in op.operands if v.type.size]
  dsts = [place.ap() for place, r in ((ctx.new_result(r), r) for r in op.results) if r.type.size]
  ctx.builder.host_callback(key, dsts, srcs, debug=ctx.debug_id)
