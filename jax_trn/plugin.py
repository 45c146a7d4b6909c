"""The `jax_plugins` entry point: registers the `trn` platform with JAX.

JAX calls `initialize()` while discovering backends. Registration is cheap: the client (and the
simulated chips) is created only when JAX first asks for the backend, from the configuration
current at that moment (jax_trn.config). The trn lowerings of the linear-algebra primitives
JAX lowers only for other platforms are registered with it (jax_trn.linalg), and those of the host
callback primitives (jax_trn.host_callbacks).
"""

from __future__ import annotations

import logging
import pathlib

from jax_trn import _compat, _jax_private, _libraries

logger = logging.getLogger(__name__)

PLATFORM = "trn"
# Above CPU (0) like any accelerator plugin, so trn is the default backend once installed.
PRIORITY = 400


def library_path() -> pathlib.Path:
  return _libraries.PJRT_LIBRARY


def initialize() -> None:
  _compat.check_jaxlib_version()
  if _jax_private.plugin_registered(PLATFORM):
    return  # registered already: by the entry point, or by an explicit call before it
  problem = _libraries.missing()
  if problem is not None:
    # JAX only logs an exception raised here and runs on CPU; a failing backend reaches the user.
    _jax_private.register_failing_backend(PLATFORM, priority=PRIORITY, message=problem)
    logger.warning("%s", problem)
    return
  from jax_trn import config, device_mesh, host_callbacks, linalg

  path = library_path()
  _jax_private.register_plugin(
      PLATFORM, priority=PRIORITY, library_path=str(path),
      options=lambda: config.current().client_options())
  _jax_private.enable_donation(PLATFORM)
  linalg.register()  # lowerings for "trn", which is a known platform now
  host_callbacks.register()
  device_mesh.register()  # topology-aware jax.make_mesh over trn devices
  logger.debug("registered PJRT plugin %s from %s", PLATFORM, path)
