"""A sample of Optax 0.2.8's own test files, from its PyPI sdist, passes on trn wherever it passes
on the CPU, except the failures its manifest (tests/suites/manifests/optax.json) explains.

The full runs of Optax, Flax and JAX are `python tests/suites/jax_library_suite.py ...`
(docs/developing.md); this is the part CI runs. Without PyPI it skips, saying so."""

import pathlib
import tempfile

import pytest

from suites import jax_library_suite as runner

# Losses, schedules and numerics (with an expected float64 failure): 111 tests, quick per device.
SAMPLE = ("optax/losses/_regression_test.py", "optax/schedules/_join_test.py",
          "optax/_src/numerics_test.py")


@pytest.mark.slow
def test_optax_sample_passes_on_trn_as_on_cpu(capsys):
  suite = runner.SUITES["optax"]
  with tempfile.TemporaryDirectory(prefix="optax_sample_") as tmp:
    root = runner.sources(suite, None, pathlib.Path(tmp))
    if root is None:
      pytest.skip(capsys.readouterr().out.strip())
    outcome = runner.run_suite(suite, root, list(SAMPLE), sample=1, jobs=2, timeout=600)
  record = runner.report(suite, list(SAMPLE), outcome, runner.load_manifest(suite), sample=1)
  for file in SAMPLE:
    assert file in record["files"], f"{file} ran on neither device"
    ran = record["files"][file]["both_passed"] + record["files"][file]["trn_failed"]
    assert ran > 0, f"no test of {file} passed on the CPU and ran on trn"
  assert not record["new_failures"], record["new_failures"]
