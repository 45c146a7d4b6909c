"""XLA compile options (JAX's `jit(..., compiler_options={...})`, CompileOptionsProto's
env_option_overrides) are checked as XLA checks them: by XLA's own parser.

NeuronCore programs take none of XLA's options (they tune XLA's passes, which do not run here),
so a valid one is accepted and has no effect; an unknown name or a value of the wrong type is
INVALID_ARGUMENT with XLA's message ("No such compile option: 'x'", "While setting option x,
'v' is not a valid bool value."). The parser is reached by compiling an empty module on a
jaxlib CPU client with the overrides (CompileOptions::ApplyAllOptionOverrides runs there); the
client is made once, on the first compile that has overrides.
"""

from __future__ import annotations

import functools

from hlo_lowering.errors import INVALID_ARGUMENT, CompileError

_EMPTY_MODULE = "module { func.func @main() { return } }"


@functools.cache
def _cpu_client():
  from jaxlib import xla_client
  return xla_client.make_cpu_client()


def check(overrides: tuple[tuple[str, bool | int | float | str], ...]) -> None:
  """CompileError (INVALID_ARGUMENT, XLA's message) unless XLA accepts every (name, value)."""
  if not overrides:
    return
  from jaxlib import xla_client
  options = xla_client.CompileOptions()
  options.env_option_overrides = list(overrides)
  client = _cpu_client()
  try:
    client.compile_and_load(_EMPTY_MODULE, xla_client.DeviceList(tuple(client.devices()[:1])),
                            options)
  except Exception as e:  # noqa: BLE001 — jaxlib raises XlaRuntimeError with XLA's status
    message = str(e).removeprefix("INVALID_ARGUMENT: ")
    raise CompileError(message, INVALID_ARGUMENT) from None
