"""A pytest plugin (`-p suite_pytest_plugin`) that runs another project's JAX tests unedited.

The suite runner (tests/suites/jax_library_suite.py) loads it into every pytest process it starts.
- On trn (JAX_PLATFORMS names trn) it registers the plugin from this source tree before any test
  module imports JAX's backends (a source checkout built in place has no `jax_plugins` entry
  point). The runner sets JAX_PLATFORMS: `trn,cpu` for Optax and Flax (trn is the default device;
  host-side helpers that ask for the CPU still get it), `trn` for JAX's own tests (their test
  utilities take the first platform as the device under test).
- `--sample-one-in N` keeps about one test in N, chosen by a hash of the test id, so the trn and
  CPU runs select the same tests even where the two devices parametrize a file differently.
- The report header names the default backend, so a log shows where the tests ran.
"""

import os
import zlib
from importlib import metadata


def pytest_configure(config):  # noqa: ARG001  (pytest's hook signature)
  platforms = os.environ.get("JAX_PLATFORMS", "")
  if "trn" in platforms.split(",") and not any(
      ep.name == "trn" for ep in metadata.entry_points(group="jax_plugins")):
    from jax_trn import plugin
    plugin.initialize()


def sampled(test_id: str, one_in: int) -> bool:
  """Whether the sample of one test in `one_in` holds `test_id` (the same on every device)."""
  return zlib.crc32(test_id.encode()) % one_in == 0


def pytest_addoption(parser):
  parser.addoption("--sample-one-in", type=int, default=1, metavar="N",
                   help="run about one test in N, chosen by a hash of its id")


def pytest_collection_modifyitems(config, items):
  one_in = config.getoption("sample_one_in")
  if one_in > 1:
    keep = [sampled(item.nodeid, one_in) for item in items]
    config.hook.pytest_deselected(items=[item for item, k in zip(items, keep) if not k])
    items[:] = [item for item, k in zip(items, keep) if k]


def pytest_report_header(config):  # noqa: ARG001
  import jax
  return f"jax default backend: {jax.default_backend()} ({jax.devices()[0]})"
