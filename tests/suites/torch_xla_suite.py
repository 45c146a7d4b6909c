"""Runs torch_xla v2.9.0's own test files on trn and on the CPU and reports what passes.

    python tests/suites/torch_xla_suite.py [--source DIR] [--devices TRN,CPU] [--files ...]

The test sources are never part of this repository: they are read from `--source` (a
pytorch/xla checkout at v2.9.0, its `test/` directory is used) or downloaded from GitHub at run
time. Without network access and without `--source` the runner says so and exits 0 (CI has no
internet). Each file runs under pytest in its own process per device (PJRT_DEVICE selects the
backend once per process), with a conftest that registers the trn plugin from this source tree.
Tests that end the whole process when they fail (not a test failure pytest could record) are
deselected and listed in PROCESS_EXITS. The summary gives, per file and device, passed / failed /
skipped, and how many of the tests that pass on the CPU pass on trn; `--json` writes the per-test
outcomes. docs/developing.md ("Suites we did not write") has the measured figures.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import urllib.request
import xml.etree.ElementTree as ET

from jax_library_suite import SOURCE_PATH  # this folder's: the source tree only when built in place

TAG = "v2.9.0"
FILES = ("test_operations.py", "test_core_aten_ops.py")
SUPPORT = ("test_utils.py",)
URL = "https://raw.githubusercontent.com/pytorch/xla/{tag}/test/{name}"
REPO = pathlib.Path(__file__).resolve().parents[2]

# test id -> why it is not run: a failure there ends the process (os._exit), losing every result.
PROCESS_EXITS = {
    "test_operations.py::TestParallelTensorMNIST::test":
        "torch_xla.distributed.data_parallel calls os._exit(17) when a replica thread raises; "
        "data-parallel training all-reduces across devices, which is multi-device (refused)",
}

_CONFTEST = """
import os
if os.environ.get("PJRT_DEVICE") == "TRN":
  from torch_xla.experimental import plugins
  from jax_trn.torch_plugin import TrnPlugin
  plugins.register_plugin("TRN", TrnPlugin())
"""


def _sources(source: str | None, workdir: pathlib.Path) -> pathlib.Path | None:
  """A directory holding the test files (copied from `source`, else downloaded), or None."""
  for name in FILES + SUPPORT:
    if source:
      text = (pathlib.Path(source) / "test" / name).read_text()
    else:
      try:
        with urllib.request.urlopen(URL.format(tag=TAG, name=name), timeout=30) as response:
          text = response.read().decode()
      except OSError as e:
        print(f"torch_xla suite: cannot download {name} ({e}); skipped (pass --source DIR)")
        return None
    (workdir / name).write_text(text)
  (workdir / "conftest.py").write_text(_CONFTEST)
  return workdir


def _run(tests: pathlib.Path, name: str, device: str, timeout: int) -> dict[str, str]:
  """{test id: "passed" | "failed" | "skipped"} of one file on one device."""
  report = tests / f"{name}.{device}.xml"
  env = dict(os.environ, PJRT_DEVICE=device,
             PYTHONPATH=os.pathsep.join(SOURCE_PATH + [os.environ.get("PYTHONPATH", "")]))
  env.pop("JAX_PLATFORMS", None)
  deselect = [arg for test in PROCESS_EXITS if test.startswith(name + "::")
              for arg in ("--deselect", test)]
  command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", name,
             f"--junitxml={report}", *deselect]
  try:
    subprocess.run(command, cwd=tests, env=env, timeout=timeout, capture_output=True)
  except subprocess.TimeoutExpired:
    print(f"torch_xla suite: {name} on {device} ran past {timeout} s")
  if not report.exists():
    return {}
  outcomes = {}
  for case in ET.parse(report).iter("testcase"):
    test_id = f"{name}::{case.get('classname', '').split('.')[-1]}::{case.get('name')}"
    kinds = {child.tag for child in case}
    outcomes[test_id] = ("failed" if kinds & {"failure", "error"} else
                         "skipped" if "skipped" in kinds else "passed")
  return outcomes


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--source", help="a pytorch/xla checkout at " + TAG)
  parser.add_argument("--devices", default="TRN,CPU")
  parser.add_argument("--files", nargs="*", default=list(FILES))
  parser.add_argument("--timeout", type=int, default=3600, help="seconds per file and device")
  parser.add_argument("--json", help="write every test's outcome per device here")
  args = parser.parse_args(argv)
  with tempfile.TemporaryDirectory(prefix="torch_xla_suite_") as tmp:
    tests = _sources(args.source, pathlib.Path(tmp))
    if tests is None:
      return 0
    results = {device: {} for device in args.devices.split(",")}
    for name in args.files:
      for device in results:
        results[device].update(_run(tests, name, device, args.timeout))
  for name in args.files:
    for device, outcomes in results.items():
      mine = [o for t, o in outcomes.items() if t.startswith(name + "::")]
      print(f"{name} {device}: {mine.count('passed')} passed, {mine.count('failed')} failed, "
            f"{mine.count('skipped')} skipped")
    if {"TRN", "CPU"} <= results.keys():
      on_cpu = [t for t, o in results["CPU"].items() if t.startswith(name + "::") and o == "passed"]
      on_both = [t for t in on_cpu if results["TRN"].get(t) == "passed"]
      share = 100 * len(on_both) / max(len(on_cpu), 1)
      print(f"{name}: trn passes {len(on_both)} of the {len(on_cpu)} that pass on CPU "
            f"({share:.1f} %)")
      for t in sorted(set(on_cpu) - set(on_both)):
        print(f"  {results['TRN'].get(t, 'not run')}: {t}")
  if args.json:
    pathlib.Path(args.json).write_text(json.dumps(results, indent=1, sort_keys=True))
  return 0


if __name__ == "__main__":
  sys.exit(main())
