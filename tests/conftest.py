"""Fixtures shared by the suites that run JAX on both backends."""

import atexit
import os
import shutil
import tempfile
from importlib import metadata

# The CPU reference runs multi-device programs on as many devices as the simulated chips expose
# (tests/test_multi_device.py); XLA reads the flag when the CPU backend starts, after this.
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                             " --xla_force_host_platform_device_count=8").strip()

import jax  # noqa: E402
import pytest  # noqa: E402


def _register_source_tree_plugin() -> None:
  """An installed jax-trn registers through its `jax_plugins` entry point; a source tree built
  in place (cmake -DTRN_INPLACE=ON, PYTHONPATH=.) has no entry point, so register it here."""
  if not any(ep.name == "trn" for ep in metadata.entry_points(group="jax_plugins")):
    from jax_trn import plugin
    plugin.initialize()


_register_source_tree_plugin()

# The persistent compile cache of this test session: a fresh temporary directory (unless the caller
# set TRN_CACHE_DIR), so test runs never touch ~/.cache/jax-trn and do not depend on each other.
# tests/fresh_process.py passes it on to the processes it starts.
if "TRN_CACHE_DIR" not in os.environ:
  os.environ["TRN_CACHE_DIR"] = tempfile.mkdtemp(prefix="jax-trn-test-cache-")
  atexit.register(shutil.rmtree, os.environ["TRN_CACHE_DIR"], ignore_errors=True)


@pytest.fixture(scope="session")
def trn():
  """The first simulated NeuronCore."""
  return jax.devices("trn")[0]


@pytest.fixture(scope="session")
def cpu():
  """The JAX CPU backend: the reference every trn result is compared against."""
  return jax.devices("cpu")[0]
