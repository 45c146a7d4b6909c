"""The `jax_plugins` entry point: registers the `trn` platform with JAX.

JAX calls `initialize()` while discovering backends. Registration is cheap: the client (and the
simulated chips) is created only when JAX first asks for the backend, from the configuration
current at that moment (jax_trn.config).
"""

from __future__ import annotations

import logging
import pathlib

from jax_trn import _compat, _jax_private

logger = logging.getLogger(__name__)

PLATFORM = "trn"
# Above CPU (0) like any accelerator plugin, so trn is the default backend once installed.
PRIORITY = 400


def library_path() -> pathlib.Path:
  return pathlib.Path(__file__).with_name("libpjrt_trn.so")


def initialize() -> None:
  _compat.check_jaxlib_version()
  from jax_trn import config

  if _jax_private.plugin_registered(PLATFORM):
    return  # registered already: by the entry point, or by an explicit call before it
  path = library_path()
  if not path.exists():
    raise RuntimeError(f"jax-trn's PJRT plugin is missing at {path}: reinstall jax-trn")
  _jax_private.register_plugin(
      PLATFORM, priority=PRIORITY, library_path=str(path),
      options=lambda: config.current().client_options())
  logger.debug("registered PJRT plugin %s from %s", PLATFORM, path)
