"""A pytest plugin (`-p suite_pytest_plugin`) that runs another project's JAX tests unedited.

The suite runner (tests/suites/jax_library_suite.py) loads it into every pytest process it starts.
- On trn (JAX_PLATFORMS names trn) it registers the plugin from this source tree before any test
  module imports JAX's backends (a source checkout built in place has no `jax_plugins` entry
  point). The runner sets JAX_PLATFORMS: `trn,cpu` for Optax and Flax (trn is the default device;
  host-side helpers that ask for the CPU still get it), `trn` for JAX's own tests (their test
  utilities take the first platform as the device under test; `trn,cpu` for jax-multi-device).
- `--sample-one-in N` keeps about one test in N, chosen by a hash of the test id, so the trn and
  CPU runs select the same tests even where the two devices parametrize a file differently.
- `--progress PATH` appends one JSON line per test as it starts and as it ends (its outcome and
  the first line of its error), and `--case-timeout S` ends the process after S seconds in one
  test (faulthandler's watchdog thread: a test stuck in native code is ended too; the threads'
  tracebacks go to PATH.traceback), so the runner learns which test hung or crashed, and where,
  and goes on past it (`--deselect-file PATH`: ids to leave out; `--select-file PATH`: the only
  ids to run).
- The report header names the default backend, so a log shows where the tests ran.
"""

import faulthandler
import json
import os
import sys
import zlib
from importlib import metadata


_CONFIG = []  # the session's config: pytest's logstart/logreport hooks are not given it


def pytest_configure(config):
  _CONFIG.append(config)
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
  parser.addoption("--progress", metavar="PATH", help="append each test's start and outcome here")
  parser.addoption("--case-timeout", type=float, default=0, metavar="S",
                   help="end the process when one test runs past S seconds")
  parser.addoption("--deselect-file", metavar="PATH", help="test ids to leave out, one a line")
  parser.addoption("--select-file", metavar="PATH", help="run only these test ids, one a line")


def pytest_collection_modifyitems(config, items):
  one_in = config.getoption("sample_one_in")
  left_out, only = set(), None
  if config.getoption("deselect_file"):
    with open(config.getoption("deselect_file")) as f:
      left_out = set(f.read().splitlines())  # ids may hold spaces: "_(2, 3)_P(None, 'y')"
  if config.getoption("select_file"):
    with open(config.getoption("select_file")) as f:
      only = set(f.read().splitlines())
  if one_in > 1 or left_out or only is not None:
    keep = [sampled(item.nodeid, one_in) and item.nodeid not in left_out and
            (only is None or item.nodeid in only) for item in items]
    config.hook.pytest_deselected(items=[item for item, k in zip(items, keep) if not k])
    items[:] = [item for item, k in zip(items, keep) if k]


def pytest_report_header(config):  # noqa: ARG001
  import jax
  return f"jax default backend: {jax.default_backend()} ({jax.devices()[0]})"


def _progress(record: dict) -> None:
  path = _CONFIG[0].getoption("progress")
  if path:
    with open(path, "a") as f:
      f.write(json.dumps(record) + "\n")


def pytest_runtest_logstart(nodeid, location):  # noqa: ARG001
  _progress({"test": nodeid, "started": True})
  if _CONFIG[0].getoption("case_timeout"):
    # The traceback goes next to the progress file: pytest captures stderr, and _exit loses it.
    path = _CONFIG[0].getoption("progress")
    if path and not _TRACEBACK:
      _TRACEBACK.append(open(path + ".traceback", "w"))  # noqa: SIM115 (open until exit)
    faulthandler.dump_traceback_later(_CONFIG[0].getoption("case_timeout"), exit=True,
                                      file=_TRACEBACK[0] if _TRACEBACK else sys.stderr)


_TRACEBACK = []  # the file faulthandler writes a hung test's traceback to
_OUTCOMES = {}  # test id -> (outcome, message) while its phases are reported


def pytest_runtest_logreport(report):
  outcome, message = _OUTCOMES.get(report.nodeid, ("passed", ""))
  if report.failed and outcome != "failed":
    crash = getattr(report.longrepr, "reprcrash", None)
    outcome, message = "failed", (crash.message if crash else str(report.longrepr))
  elif report.skipped and outcome == "passed":
    outcome = "skipped"
  _OUTCOMES[report.nodeid] = (outcome, message.strip().split("\n")[0])
  if report.when == "teardown":
    faulthandler.cancel_dump_traceback_later()
    _progress({"test": report.nodeid, "outcome": outcome,
               "message": _OUTCOMES.pop(report.nodeid)[1]})
