"""The runners of other projects' test suites (tests/suites/jax_library_suite.py) count what they
ran correctly, flag every trn failure that their manifest does not explain, and their committed
manifests and results are reviewed and consistent; docs/coverage.md publishes the results."""

import json

import pytest

from hlo_lowering import suite_results
from suites import jax_library_suite as runner
from suites import suite_pytest_plugin

FLOAT64 = ("jax.errors.JaxRuntimeError: UNIMPLEMENTED: argument 0 of the program is float64 [2]: "
           "NeuronCores have no float64 type: use float32")
NO_RULE = ("jax.errors.JaxRuntimeError: UNIMPLEMENTED: stablehlo.reduce_window is not supported on "
           "NeuronCores: no lowering rule accepts these operand types (operands: f32[3])")
CUSTOM = ("UNIMPLEMENTED: stablehlo.custom_call is not supported on NeuronCores: call_target_name "
          "'lapack_ssyevd_ffi' names a host or vendor kernel")


HANG_AND_CRASH = """
import os, time
def test_passes(): pass
def test_hangs(): time.sleep(600)
def test_crashes(): os.abort()
def test_fails(): assert 1 == 2, "one is not two"
def test_after_them(): pass
"""


def test_a_hanging_or_crashing_case_is_a_failure_and_the_file_goes_on(tmp_path):
  """A test past the case timeout, or one that ends its process, is reported as such, and the
  tests after it still run (no suite run is stuck or cut short by one case)."""
  (tmp_path / "src").mkdir()
  (tmp_path / "src" / "a_test.py").write_text(HANG_AND_CRASH)
  (tmp_path / "reports").mkdir()
  outcomes = runner.run_file(tmp_path / "src", "a_test.py", "cpu", sample=1, timeout=600,
                             reports=tmp_path / "reports", case_timeout=3)
  assert outcomes == {
      "a_test.py::test_passes": ("passed", ""),
      "a_test.py::test_hangs": ("failed", "hang: ran past the 3 s case timeout at "
                                          f"{tmp_path / 'src' / 'a_test.py'}:4 in test_hangs"),
      "a_test.py::test_crashes": ("failed", "crash: the test process ended with status -6 at "
                                            f"{tmp_path / 'src' / 'a_test.py'}:5 in test_crashes"),
      "a_test.py::test_fails": ("failed", "AssertionError: one is not two"),
      "a_test.py::test_after_them": ("passed", "")}


FLAKY = """
import os, pytest
@pytest.mark.parametrize("shape", [(2, 3), (3, 2)], ids=["(2, 3)", "(3, 2)"])
def test_shaped(shape): assert os.path.exists("fixed") or shape == (3, 2)
def test_fails(): assert os.path.exists("fixed")
def test_passes(): pass
"""


def test_rerun_failed_runs_only_the_trn_failures_again_and_records_them(tmp_path, monkeypatch):
  """--rerun-failed runs again just the tests that failed on trn and pass on the CPU (ids with
  spaces included), and their new outcomes replace the old ones."""
  (tmp_path / "src").mkdir()
  (tmp_path / "src" / "a_test.py").write_text(FLAKY)
  suite = runner.Suite("fake", "0", "cpu", ("a_test.py",))
  ids = ["a_test.py::test_shaped[(2, 3)]", "a_test.py::test_shaped[(3, 2)]",
         "a_test.py::test_fails", "a_test.py::test_passes"]
  first = runner.run_file(tmp_path / "src", "a_test.py", "cpu", sample=1, timeout=600,
                          reports=tmp_path)
  assert [first[t][0] for t in ids] == ["failed", "passed", "failed", "passed"]
  outcome = runner.Outcome(trn=dict(first), cpu={t: ("passed", "") for t in ids})
  (tmp_path / "src" / "fixed").write_text("")
  ran = []
  real_run_file = runner.run_file
  monkeypatch.setattr(runner, "run_file", lambda *a, **k: ran.append(k["only"]) or
                      real_run_file(*a, **k))
  runner.rerun_failed(suite, tmp_path / "src", outcome, timeout=600, case_timeout=0)
  assert ran == [["a_test.py::test_fails", "a_test.py::test_shaped[(2, 3)]"]]
  assert all(outcome.trn[t] == ("passed", "") for t in ids)


@pytest.mark.parametrize("message, category", [
    (FLOAT64, "float64"),
    (NO_RULE, "unsupported op: stablehlo.reduce_window"),
    (CUSTOM, "unsupported op: custom_call lapack_ssyevd_ffi"),
    ("AssertionError: \nNot equal to tolerance rtol=1e-06", "mismatch (unreviewed: tolerance or "
                                                             "wrong result)"),
    ("TypeError: something else", "unreviewed: TypeError: something else"),
])
def test_failure_categories_are_guessed_from_the_error(message, category):
  assert runner.guess_category(message) == category


def test_the_sample_is_a_function_of_the_test_id():
  ids = [f"f.py::C::test_{i}" for i in range(4000)]
  chosen = [t for t in ids if suite_pytest_plugin.sampled(t, 10)]
  assert chosen == [t for t in ids if suite_pytest_plugin.sampled(t, 10)]
  assert 300 < len(chosen) < 500


def _outcome():
  cpu = {"a.py::T::ok": ("passed", ""), "a.py::T::known": ("passed", ""),
         "a.py::T::cpu_only": ("passed", ""), "a.py::T::cpu_dtype": ("passed", ""),
         "a.py::T::new": ("passed", ""), "a.py::T::cpu_only_skip": ("skipped", ""),
         "a.py::T::both_fail": ("failed", "x")}
  trn = {"a.py::T::ok": ("passed", ""), "a.py::T::known": ("failed", FLOAT64),
         "a.py::T::cpu_only": ("skipped", ""),
         "a.py::T::new": ("failed", NO_RULE), "a.py::T::cpu_only_skip": ("failed", "y"),
         "a.py::T::both_fail": ("failed", "x")}
  return runner.Outcome(trn=trn, cpu=cpu)


def test_report_counts_per_file_and_flags_failures_the_manifest_lacks(capsys):
  suite = runner.SUITES["optax"]
  manifest = {"a.py::T::known": "float64", "a.py::T::fixed_meanwhile": "tolerance"}
  outcome = _outcome()
  outcome.trn["a.py::T::fixed_meanwhile"] = ("passed", "")
  record = runner.report(suite, ["a.py", "unrun.py"], outcome, manifest, sample=1)
  assert record["not_measured"] == ["unrun.py"]
  assert record["files"]["a.py"] == {
      "trn": {"passed": 2, "failed": 4, "skipped": 1},
      "cpu": {"passed": 5, "failed": 1, "skipped": 1}, "both_passed": 1, "trn_failed": 2,
      "trn_skipped": 1, "trn_absent": 1}
  assert [f["test"] for f in record["new_failures"]] == ["a.py::T::new"]
  assert record["categories"] == {"float64": 1, "unsupported op: stablehlo.reduce_window": 1}
  assert record["fixed"] == ["a.py::T::fixed_meanwhile"]
  out = capsys.readouterr().out
  assert ("trn passes 1 of the 3 that pass on CPU and ran on trn (33.3 %; of the others 1 skip "
          "themselves on trn, 1 are absent from trn's run)") in out
  assert "NEW failure: a.py::T::new" in out


@pytest.mark.parametrize("suite", sorted(runner.SUITES))
def test_committed_manifests_are_reviewed(suite):
  """Every expected failure has a reviewed reason: no guessed "unreviewed" category is committed."""
  manifest = runner.load_manifest(runner.SUITES[suite])
  unreviewed = {t: c for t, c in manifest.items() if "unreviewed" in c or not c.strip()}
  assert not unreviewed, f"review these categories in tests/suites/manifests/{suite}.json"
  assert all("::" in t for t in manifest)


def test_committed_results_agree_with_their_manifests():
  """A results file counts each category as its manifest does, over the tests it ran."""
  for path in sorted(runner.RESULTS.glob("*.json")):
    record = json.loads(path.read_text())
    assert record["new_failures"] == [], f"{path.name}: record the new failures in the manifest"
    failing = sum(f["trn_failed"] for f in record["files"].values())
    assert sum(record["categories"].values()) == failing, path.name
    manifest = set(runner.load_manifest(runner.SUITES[record["suite"]]).values())
    assert set(record["categories"]) <= manifest, path.name


def test_coverage_doc_section_renders_the_results(tmp_path):
  record = {"suite": "optax", "version": "0.2.8", "sample_one_in": 4, "new_failures": [],
            "not_measured": ["optax/b_test.py"],
            "fixed": [], "categories": {"float64": 2},
            "files": {"optax/a_test.py": {"trn": {"passed": 8, "failed": 2, "skipped": 1},
                                          "cpu": {"passed": 11, "failed": 0, "skipped": 0},
                                          "both_passed": 8, "trn_failed": 2,
                                          "trn_skipped": 1, "trn_absent": 0}}}
  (tmp_path / "optax.json").write_text(json.dumps(record))
  text = "\n".join(suite_results.render(tmp_path))
  assert "### optax 0.2.8" in text
  assert "trn passes 8 of the 10 tests that pass on the CPU and run on trn (80.0 %).** Of" in text
  assert "1 skip themselves on trn (tests of CPU-only behaviour) and 0 are absent" in text
  assert "| `optax/a_test.py` | 8 / 2 / 1 | 11 / 0 / 0 | 8 / 10 | 80.0 % |" in text
  assert "| float64 | 2 |" in text
  assert "Not measured (not reached in this run, or no test of the file in the sample): " \
         "`optax/b_test.py`." in text
  assert suite_results.render(tmp_path / "absent") == []


def _rendered(tmp_path, name: str, *, file: str, passed: int = 2, **fields) -> str:
  """coverage.md's section for a results file `name`.json of one file whose `passed` tests pass
  on both devices, with the record's other `fields`."""
  counts = {"passed": passed, "failed": 0, "skipped": 0}
  record = {"sample_one_in": 1, "new_failures": [], "not_measured": [], "fixed": [],
            "categories": {}, **fields,
            "files": {file: {"trn": counts, "cpu": counts, "both_passed": passed,
                             "trn_failed": 0, "trn_skipped": 0, "trn_absent": 0}}}
  (tmp_path / f"{name}.json").write_text(json.dumps(record))
  return "\n".join(suite_results.render(tmp_path))


def test_a_part_of_a_suite_runs_and_publishes_apart(tmp_path):
  for name in ("tests/linen/a_test.py", "tests/nnx/b_test.py", "tests/nnx/nn/c_test.py"):
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / name).write_text("")
  nnx = runner.PARTS["flax"]["nnx"]
  assert runner.Suite("flax", "0.12.8", "trn,cpu", nnx).files(tmp_path) == [
      "tests/nnx/b_test.py", "tests/nnx/nn/c_test.py"]
  text = _rendered(tmp_path, "flax-nnx", suite="flax", version="0.12.8", part="nnx",
                   file="tests/nnx/b_test.py")
  assert "### flax 0.12.8 (nnx)" in text
  assert "`python tests/suites/jax_library_suite.py flax --part nnx --results`, every test" in text


def test_a_run_with_float64_as_float32_says_so(tmp_path):
  text = _rendered(tmp_path, "optax", suite="optax", version="0.2.8", float64="float32",
                   file="optax/a_test.py")
  assert ("`python tests/suites/jax_library_suite.py optax --float64 float32 --results`, every "
          "test, float64 computed as float32 on trn (TRN_FLOAT64=float32): **trn passes 2") in text
