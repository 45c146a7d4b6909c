"""A sample of Optax 0.2.8's and of Flax 0.12.8's nnx test files, from their PyPI sdists, passes
on trn wherever it passes on the CPU, except the failures the suite's manifest
(tests/suites/manifests/<suite>.json) explains.

The full runs of Optax, Flax and JAX are `python tests/suites/jax_library_suite.py ...`
(docs/developing.md); this is the part CI runs. Without PyPI it skips, saying so."""

import pathlib
import tempfile

import pytest

from suites import jax_library_suite as runner

SAMPLES = {
    # Losses, schedules and numerics (with an expected float64 failure): 111 tests.
    "optax": ("optax/losses/_regression_test.py", "optax/schedules/_join_test.py",
              "optax/_src/numerics_test.py"),
    # Variables set through Variable[...] (scalar scatters), RNG streams, the default LSTM/GRU
    # cells and optimizers: 108 tests.
    "flax": ("tests/nnx/containers_test.py", "tests/nnx/rngs_test.py",
             "tests/nnx/nn/recurrent_test.py", "tests/nnx/optimizer_test.py"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_suite_sample_passes_on_trn_as_on_cpu(name, capsys):
  suite, sample = runner.SUITES[name], list(SAMPLES[name])
  with tempfile.TemporaryDirectory(prefix=f"{name}_sample_") as tmp:
    root = runner.sources(suite, None, pathlib.Path(tmp))
    if root is None:
      pytest.skip(capsys.readouterr().out.strip())
    outcome = runner.run_suite(suite, root, sample, sample=1, jobs=2, timeout=600)
  record = runner.report(suite, sample, outcome, runner.load_manifest(suite), sample=1)
  for file in sample:
    assert file in record["files"], f"{file} ran on neither device"
    ran = record["files"][file]["both_passed"] + record["files"][file]["trn_failed"]
    assert ran > 0, f"no test of {file} passed on the CPU and ran on trn"
  assert not record["new_failures"], record["new_failures"]
