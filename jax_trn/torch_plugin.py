"""The `torch_xla.plugins` entry point: the same simulated Trainium device for PyTorch.

With jax-trn and torch_xla installed, `PJRT_DEVICE=TRN` makes torch_xla load libpjrt_trn.so
through this `DevicePlugin`; `xm.xla_device()` / `torch_xla.device()` is then the first
NeuronCore, and `xla:0..N-1` are all the simulated NeuronCores, driven by one process
(`xmp.spawn` starts one, with a thread per device). The configuration is jax_trn.config's
(TRN_TARGET, TRN_CHIPS, TRN_LNC, TRN_HBM_BYTES, or `jax_trn.configure(...)` before the first
device use).

Importing this module imports neither torch nor JAX beyond the `DevicePlugin` base class: the
compiler (hlo_lowering, which imports JAX lazily) runs in-process when torch_xla first compiles.
torch_xla sends HloModuleProtos, which the compiler converts to StableHLO itself, so
XLA_STABLEHLO_COMPILE is left as the user set it.
"""

from __future__ import annotations

import logging

from torch_xla.experimental import plugins

from jax_trn import _libraries

_libraries.require()  # torch_xla raises what its plugin's import raises: the fix reaches the user

from jax_trn import config  # noqa: E402
from jax_trn import plugin as _jax_plugin  # noqa: E402

logger = logging.getLogger(__name__)


class TrnPlugin(plugins.DevicePlugin):
  """torch_xla's view of jax-trn: the PJRT library and the simulated system's options."""

  def library_path(self) -> str:
    return str(_jax_plugin.library_path())

  def physical_chip_count(self) -> int:
    # torch_xla reads this as how many processes `xmp.spawn` starts, each then running one thread
    # per device it sees. Every simulated chip lives in one client, so one process drives them
    # all: its threads' replicated programs meet at their collectives (docs/multi-device.md).
    return 1

  def client_create_options(self) -> dict[str, str | int]:
    # torch_xla uploads each Python number as an f64[] array; its programs narrow them to f32
    # (hlo_lowering/passes/narrow_float64.py, docs/numerics.md).
    return {**config.current().client_options(), "float64_scalars": 1}

  def requires_xla_coordinator(self) -> bool:
    return False  # every simulated chip lives in this process

  def configure_single_process(self) -> None:
    # One process drives every simulated device; nothing to set.
    logger.debug("trn torch_xla plugin: single process, %s", config.current())
