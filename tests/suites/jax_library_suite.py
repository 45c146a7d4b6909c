"""Runs Optax's, Flax's or JAX's own test files on trn and on the CPU, against a manifest.

    python tests/suites/jax_library_suite.py {optax,flax,jax,jax-multi-device} [--part NAME]
        [--source DIR] [--files ...] [--sample N] [--jobs N] [--timeout S] [--case-timeout S]
        [--json PATH] [--outcomes PATH [--rerun-failed]] [--results] [--update-manifest]
        [--float64 {error,float32}]

The test sources are never part of this repository: Optax 0.2.8's and Flax 0.12.8's come from
their PyPI sdists (`pip download` at run time), JAX's from `--source` (a jax checkout at tag
jax-v0.10.2; the jax sdist holds no tests) or GitHub at run time. When the sources cannot be
had, the runner says so and exits 0. Each file runs under pytest in its own process per device,
with tests/suites/suite_pytest_plugin.py loaded: trn is registered from this source tree and
JAX_PLATFORMS makes it the default device (Optax and Flax: `trn,cpu`; JAX: `trn`); the CPU run
uses `cpu`. `jax-multi-device` runs JAX's pmap, shard_map, array and api tests on 8 devices
(`TRN_CHIPS=2` on trn, `--xla_force_host_platform_device_count=8` on the CPU). A test that runs
past `--case-timeout` seconds or ends its process counts as a failure ("hang: ..." / "crash:
...") and the file goes on after it. The summary gives, per file and device, passed / failed /
skipped and how many of the tests that pass on the CPU and run on trn pass there (a test that
skips itself on trn, such as `jtu.run_on_devices("cpu")`, or that trn's run does not collect is
counted apart). Every such
test that fails on trn is looked up in the suite's manifest (tests/suites/manifests/<suite>.json:
test id -> reason category); one not in it is a NEW failure (exit status 1) and a manifest entry
that passes is reported as fixed.
`--outcomes PATH --rerun-failed` runs the trn failures of a saved run again (after a fix, or a
case a loaded host timed out) and saves their new outcomes there before reporting.
`--update-manifest` records new failures with a category guessed from the error (review them: a
mismatch is a tolerance or a wrong result only once someone looked) and drops fixed entries.
`--results` writes the per-file figures to tests/suites/results/<suite>.json, which
docs/coverage.md is generated from (hlo_lowering/coverage.py). `--part` runs one part of a suite
(Flax: `linen`, `nnx`), measured and published apart (results/<suite>-<part>.json, its own
sample size); the manifest stays the suite's. `--float64 float32` runs trn with
TRN_FLOAT64=float32 (docs/numerics.md), so tests that enable x64 run there, computing float64 as
float32, against the CPU's float64; the results record the policy.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import dataclasses
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
# The children get the source tree on their path only when it is built in place: an unbuilt one's
# jax_trn (no compiled libraries) would shadow the installed jax-trn.
SOURCE_PATH = [str(REPO)] if list((REPO / "jax_trn").glob("_native*")) else []
MANIFESTS = HERE / "manifests"
RESULTS = HERE / "results"
PASSED, FAILED, SKIPPED, ABSENT = "passed", "failed", "skipped", "absent"
JAX_FILES = ("lax", "lax_numpy_operators", "lax_numpy_reducers", "lax_numpy_indexing", "lax_numpy",
             "lax_control_flow", "random", "api", "nn", "lax_autodiff", "linalg", "lax_vmap",
             "fft", "lax_scipy")
# JAX's multi-device tests, on 8 devices: 2 trn2 chips of 4 NeuronCores (LNC=2), and 8 host
# devices forced on the CPU, as JAX's own CI runs them. The trn run keeps the CPU backend beside
# trn (JAX_PLATFORMS `trn,cpu`, trn the default) for the tests that place values on the host.
JAX_MULTI_DEVICE_FILES = ("pmap", "shard_map", "array", "api")
JAX_URL = "https://raw.githubusercontent.com/jax-ml/jax/{tag}/tests/{name}"


@dataclasses.dataclass(frozen=True)
class Suite:
  name: str
  version: str
  trn_platforms: str            # JAX_PLATFORMS of the trn run
  patterns: tuple[str, ...]     # the test files, globs relative to the source root
  trn_env: tuple[tuple[str, str], ...] = ()  # more environment of the trn run
  cpu_env: tuple[tuple[str, str], ...] = ()  # ... and of the CPU run

  def files(self, root: pathlib.Path) -> list[str]:
    return sorted({str(p.relative_to(root))
                   for pattern in self.patterns for p in root.glob(pattern)})


SUITES = {
    "optax": Suite("optax", "0.2.8", "trn,cpu", ("optax/**/*_test.py",)),
    "flax": Suite("flax", "0.12.8", "trn,cpu", ("tests/linen/*_test.py", "tests/nnx/**/*_test.py")),
    "jax": Suite("jax", "jax-v0.10.2", "trn", tuple(f"tests/{f}_test.py" for f in JAX_FILES)),
    "jax-multi-device": Suite(
        "jax-multi-device", "jax-v0.10.2", "trn,cpu",
        tuple(f"tests/{f}_test.py" for f in JAX_MULTI_DEVICE_FILES),
        trn_env=(("TRN_CHIPS", "2"),),
        cpu_env=(("XLA_FLAGS", "--xla_force_host_platform_device_count=8"),)),
}
# Parts of a suite run and published apart (--part): their files, as Suite.patterns.
PARTS = {"flax": {"linen": ("tests/linen/*_test.py",), "nnx": ("tests/nnx/**/*_test.py",)}}


def _sdist(suite: Suite, workdir: pathlib.Path) -> pathlib.Path | None:
  """The unpacked PyPI sdist of `suite` (its tests are inside), or None when pip cannot get it."""
  command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary",
             ":all:", f"{suite.name}=={suite.version}", "-d", str(workdir)]
  done = subprocess.run(command, capture_output=True, text=True)
  archives = list(workdir.glob(f"{suite.name}-{suite.version}.tar.gz"))
  if done.returncode or not archives:
    print(f"{suite.name} suite: cannot download the sdist ({done.stderr.strip()[-300:]}); skipped "
          "(pass --source DIR)")
    return None
  with tarfile.open(archives[0]) as archive:
    archive.extractall(workdir, filter="data")
  return workdir / f"{suite.name}-{suite.version}"


def _jax_tests(suite: Suite, workdir: pathlib.Path) -> pathlib.Path | None:
  """JAX's test files of `suite` at the tag, downloaded from GitHub, or None without network."""
  (workdir / "tests").mkdir()
  for file in suite.patterns:
    try:
      url = JAX_URL.format(tag=suite.version, name=pathlib.Path(file).name)
      with urllib.request.urlopen(url, timeout=30) as response:
        (workdir / file).write_bytes(response.read())
    except OSError as e:
      print(f"{suite.name} suite: cannot download {file} ({e}); skipped (pass --source DIR, a jax "
            f"checkout at {suite.version})")
      return None
  return workdir


def sources(suite: Suite, source: str | None, workdir: pathlib.Path) -> pathlib.Path | None:
  if source:
    return pathlib.Path(source).resolve()
  return _jax_tests(suite, workdir) if suite.name.startswith("jax") else _sdist(suite, workdir)


def _read_progress(path: pathlib.Path) -> tuple[dict[str, tuple[str, str]], str | None]:
  """The finished tests' {id: (outcome, error)} in a progress file, and the test it last started
  without finishing (the one that hung or crashed), if any."""
  outcomes, running = {}, None
  for line in path.read_text().splitlines() if path.exists() else []:
    try:
      record = json.loads(line)
    except ValueError:  # a line cut short as the process died
      continue
    if record.get("started"):
      running = record["test"]
    else:
      outcomes[record["test"]] = (record["outcome"], record["message"])
      running = None
  return outcomes, running


def _innermost_frame(stderr: str) -> str:
  """` at FILE:LINE in FUNCTION`: where the main thread was in the traceback faulthandler wrote
  as it ended a hung test (pytest's faulthandler writes one for a crash too); "" without one."""
  blocks = re.split(r"\n(?:Current thread|Thread) 0x[0-9a-f]+ [^\n]*\n", stderr)
  if len(blocks) < 2:
    return ""
  frame = re.search(r'File "([^"]+)", line (\d+) in (\S+)', blocks[-1])
  return f" at {frame[1]}:{frame[2]} in {frame[3]}" if frame else ""


def run_file(root: pathlib.Path, file: str, platforms: str, *, sample: int, timeout: int,
             reports: pathlib.Path, env: dict[str, str] | None = None,
             case_timeout: int = 0, only: list[str] | None = None) -> dict[str, tuple[str, str]]:
  """{test id: (outcome, first line of the error)} of one file under JAX_PLATFORMS=platforms
  (and `env`); `only`: just these test ids. A test that runs past `case_timeout` seconds, or
  ends its process, is a failure ("hang: ..." / "crash: ..."), and pytest starts again on the
  file without the tests done."""
  name = f"{file.replace('/', '_')}.{platforms.split(',')[0]}"
  progress, done_ids = reports / f"{name}.progress.jsonl", reports / f"{name}.done"
  stderr, selected = reports / f"{name}.stderr", reports / f"{name}.only"
  env = dict(os.environ, **(env or {}), JAX_PLATFORMS=platforms,
             PYTHONPATH=os.pathsep.join(SOURCE_PATH + [str(HERE),
                                                    os.environ.get("PYTHONPATH", "")]))
  command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             "-p", "suite_pytest_plugin", f"--sample-one-in={sample}", file,
             f"--progress={progress}", f"--case-timeout={case_timeout}",
             f"--deselect-file={done_ids}"]
  if only is not None:
    selected.write_text("\n".join(only))
    command.append(f"--select-file={selected}")
  outcomes: dict[str, tuple[str, str]] = {}
  deadline = time.monotonic() + timeout
  while True:
    done_ids.write_text("\n".join(outcomes))
    progress.unlink(missing_ok=True)
    pathlib.Path(f"{progress}.traceback").unlink(missing_ok=True)
    with open(stderr, "w") as errors, \
        subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.DEVNULL,
                         stderr=errors) as pytest:
      try:
        pytest.wait(max(deadline - time.monotonic(), 1))
      except subprocess.TimeoutExpired:
        print(f"  {file} under JAX_PLATFORMS={platforms} ran past {timeout} s: stopped, the tests "
              "not run by then count as not collected", flush=True)
        pytest.send_signal(signal.SIGINT)
        try:
          pytest.wait(120)
        except subprocess.TimeoutExpired:
          pytest.kill()
        return {**outcomes, **_read_progress(progress)[0]}
    finished, running = _read_progress(progress)
    outcomes.update(finished)
    if running is None:
      return outcomes
    # faulthandler's watchdog ends a test past case_timeout with exit status 1; a signal, or any
    # other exit in mid-test, is a crash.
    why = (f"hang: ran past the {case_timeout} s case timeout"
           if case_timeout and pytest.returncode == 1 else
           f"crash: the test process ended with status {pytest.returncode}")
    traceback = pathlib.Path(f"{progress}.traceback")
    why += _innermost_frame((traceback.read_text(errors="replace") if traceback.exists() else "")
                            + stderr.read_text(errors="replace"))
    print(f"  {running} under JAX_PLATFORMS={platforms}: {why}", flush=True)
    outcomes[running] = (FAILED, why)


_CATEGORIES = (  # (pattern in the error, category); the first match names it
    (re.compile(r"(float64|f64)", re.I), "float64"),
    (re.compile(r"complex", re.I), "complex"),
    (re.compile(r"call_target_name '([\w.]+)'"), r"unsupported op: custom_call \1"),
    (re.compile(r"(stablehlo\.\w+) is not supported"), r"unsupported op: \1"),
    (re.compile(r"RESOURCE_EXHAUSTED"), "out of simulated memory"),
    (re.compile(r"(not equal|not almost equal|Mismatch|allclose)", re.I),
     "mismatch (unreviewed: tolerance or wrong result)"),
)


def guess_category(message: str) -> str:
  """A reason category for a trn failure, from its error; a human confirms it in the manifest."""
  for pattern, category in _CATEGORIES:
    found = pattern.search(message)
    if found:
      return found.expand(category)
  return "unreviewed: " + message[:160]


@dataclasses.dataclass
class Outcome:
  trn: dict[str, tuple[str, str]]
  cpu: dict[str, tuple[str, str]]

  def counts(self, file: str, device: str) -> dict[str, int]:
    mine = [o for t, (o, _) in getattr(self, device).items() if t.startswith(file + "::")]
    return {o: mine.count(o) for o in (PASSED, FAILED, SKIPPED)}

  def cpu_passing(self, file: str) -> list[str]:
    return sorted(t for t, (o, _) in self.cpu.items() if t.startswith(file + "::") and o == PASSED)

  def on_trn(self, file: str, outcome: str) -> list[str]:
    """The tests of `file` that pass on the CPU and had `outcome` on trn (ABSENT: not collected
    there, as when a file parametrizes over the device's dtypes, or ran past its time)."""
    return [t for t in self.cpu_passing(file) if self.trn.get(t, (ABSENT,))[0] == outcome]


def save_outcome(outcome: Outcome, sample: int, path: str) -> None:
  saved = dict(dataclasses.asdict(outcome), sample_one_in=sample)
  pathlib.Path(path).write_text(json.dumps(saved, indent=1, sort_keys=True))


def run_suite(suite: Suite, root: pathlib.Path, files: list[str], *, sample: int, jobs: int,
              timeout: int, case_timeout: int = 0, json_path: str | None = None) -> Outcome:
  """Every file on both devices; each finished file's outcomes are saved to `json_path` at once,
  so a run stopped early keeps them (`--outcomes` reports on them)."""
  outcome = Outcome({}, {})
  with tempfile.TemporaryDirectory(prefix=f"{suite.name}_suite_reports_") as reports, \
      concurrent.futures.ThreadPoolExecutor(jobs) as pool:
    runs = {pool.submit(run_file, root, file, platforms, sample=sample, timeout=timeout,
                        reports=pathlib.Path(reports), env=dict(env),
                        case_timeout=case_timeout): (file, device)
            for file in files
            for device, platforms, env in (("trn", suite.trn_platforms, suite.trn_env),
                                           ("cpu", "cpu", suite.cpu_env))}
    for run in concurrent.futures.as_completed(runs):
      file, device = runs[run]
      getattr(outcome, device).update(run.result())
      print(f"  ran {file} on {device}: {outcome.counts(file, device)}", flush=True)
      if json_path:
        save_outcome(outcome, sample, json_path)
  return outcome


def rerun_failed(suite: Suite, root: pathlib.Path, outcome: Outcome, *, timeout: int,
                 case_timeout: int) -> None:
  """Runs again on trn, file by file, the tests that pass on the CPU and failed on trn in
  `outcome` (after a fix, or those a loaded host timed out), and records their new outcomes."""
  with tempfile.TemporaryDirectory(prefix=f"{suite.name}_suite_reports_") as reports:
    for file in sorted({t.split("::")[0] for t in outcome.cpu}):
      failing = outcome.on_trn(file, FAILED)
      if failing:
        outcome.trn.update(run_file(root, file, suite.trn_platforms, sample=1, timeout=timeout,
                                    reports=pathlib.Path(reports), env=dict(suite.trn_env),
                                    case_timeout=case_timeout, only=failing))
        print(f"  ran again on trn the {len(failing)} failures of {file}: "
              f"{sum(outcome.trn[t][0] == PASSED for t in failing)} pass now", flush=True)


def load_manifest(suite: Suite) -> dict[str, str]:
  path = MANIFESTS / f"{suite.name}.json"
  return json.loads(path.read_text()) if path.exists() else {}


def report(suite: Suite, files: list[str], outcome: Outcome, manifest: dict[str, str],
           *, sample: int) -> dict:
  """Prints the summary; returns the results record (per-file figures and failure categories)."""
  record = {"suite": suite.name, "version": suite.version, "sample_one_in": sample, "files": {},
            "not_measured": [], "categories": {}, "new_failures": [], "fixed": []}
  categories = collections.Counter()
  for file in files:
    trn, cpu = outcome.counts(file, "trn"), outcome.counts(file, "cpu")
    if not any(trn.values()) and not any(cpu.values()):
      print(f"{file}: not measured (not reached in this run, or no test of it in the sample)")
      record["not_measured"].append(file)
      continue
    failing = outcome.on_trn(file, FAILED)
    both, skipped, absent = (len(outcome.on_trn(file, o)) for o in (PASSED, SKIPPED, ABSENT))
    share = 100 * both / max(both + len(failing), 1)
    print(f"{file}: trn {trn[PASSED]} passed, {trn[FAILED]} failed, {trn[SKIPPED]} skipped; "
          f"cpu {cpu[PASSED]} passed, {cpu[FAILED]} failed, {cpu[SKIPPED]} skipped; "
          f"trn passes {both} of the {both + len(failing)} that pass on CPU and ran on trn "
          f"({share:.1f} %; of the others {skipped} skip themselves on trn, {absent} are absent "
          "from trn's run)")
    record["files"][file] = {"trn": trn, "cpu": cpu, "both_passed": both,
                             "trn_failed": len(failing), "trn_skipped": skipped,
                             "trn_absent": absent}
    for t in failing:
      message = outcome.trn[t][1]
      if t in manifest:
        categories[manifest[t]] += 1
      else:
        guess = guess_category(message)
        categories[guess] += 1
        record["new_failures"].append({"test": t, "category": guess, "error": message[:300]})
        print(f"  NEW failure: {t}\n      {guess}: {message[:300]}")
  record["fixed"] = sorted(t for t, (o, _) in outcome.trn.items() if o == PASSED and t in manifest)
  for t in record["fixed"]:
    print(f"  fixed (in the manifest, passes on trn): {t}")
  record["categories"] = dict(sorted(categories.items(), key=lambda kv: (-kv[1], kv[0])))
  total_cpu = sum(f["both_passed"] + f["trn_failed"] for f in record["files"].values())
  total_both = sum(f["both_passed"] for f in record["files"].values())
  print(f"{suite.name} {suite.version}: trn passes {total_both} of the {total_cpu} tests that pass "
        f"on CPU and ran on trn ({100 * total_both / max(total_cpu, 1):.1f} %); failures by "
        "category:")
  for category, count in record["categories"].items():
    print(f"  {count:5d}  {category}")
  return record


def update_manifest(suite: Suite, manifest: dict[str, str], record: dict) -> None:
  for failure in record["new_failures"]:
    manifest[failure["test"]] = failure["category"]
  for t in record["fixed"]:
    manifest.pop(t)
  MANIFESTS.mkdir(exist_ok=True)
  text = json.dumps(manifest, indent=1, sort_keys=True) + "\n"
  (MANIFESTS / f"{suite.name}.json").write_text(text)


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("suite", choices=sorted(SUITES))
  parser.add_argument("--part", help="one part of the suite: " + "; ".join(
      f"{name}: {', '.join(parts)}" for name, parts in PARTS.items()))
  parser.add_argument("--source", help="the suite's sources: an unpacked sdist, or a jax checkout "
                                       "at " + SUITES["jax"].version)
  parser.add_argument("--files", nargs="*", help="test files relative to the source root "
                                                 "(default: the suite's list)")
  parser.add_argument("--sample", type=int, default=1, help="run about one test in N")
  parser.add_argument("--jobs", type=int, default=1, help="pytest processes at a time")
  parser.add_argument("--timeout", type=int, default=7200,
                      help="seconds per file and device (shard_map_test on a loaded host: ~50 min)")
  parser.add_argument("--case-timeout", type=int, default=600,
                      help="seconds one test may run: past them it is a failure (hang) and the "
                           "file goes on after it (0: no limit)")
  parser.add_argument("--json", help="write every test's outcome per device here (after each "
                                     "file)")
  parser.add_argument("--outcomes", help="report on the outcomes a --json run wrote instead of "
                                         "running (after a manifest edit)")
  parser.add_argument("--rerun-failed", action="store_true",
                      help="with --outcomes and --source: first run again on trn the tests that "
                           "failed there and pass on the CPU, saving their new outcomes to the "
                           "--outcomes file")
  parser.add_argument("--results", action="store_true",
                      help="write the figures to tests/suites/results/<suite>.json")
  parser.add_argument("--update-manifest", action="store_true")
  parser.add_argument("--float64", choices=("error", "float32"), default="error",
                      help="trn's float64 policy (TRN_FLOAT64): float32 runs the tests that "
                           "enable x64, computing float64 as float32")
  args = parser.parse_args(argv)
  suite = SUITES[args.suite]
  if args.float64 != "error":
    suite = dataclasses.replace(suite, trn_env=suite.trn_env + (("TRN_FLOAT64", args.float64),))
  if args.part:
    if args.part not in PARTS.get(suite.name, {}):
      parser.error(f"{suite.name} has no part {args.part!r}")
    suite = dataclasses.replace(suite, patterns=PARTS[suite.name][args.part])
  if args.outcomes:
    saved = json.loads(pathlib.Path(args.outcomes).read_text())
    outcome = Outcome(*({t: tuple(o) for t, o in saved[d].items()} for d in ("trn", "cpu")))
    files = args.files or (suite.files(pathlib.Path(args.source)) if args.source else
                           sorted({t.split("::")[0] for t in outcome.cpu}))
    args.sample = saved.get("sample_one_in", args.sample)
    if args.rerun_failed:
      if not args.source:
        parser.error("--rerun-failed needs --source (the tests' sources)")
      rerun_failed(suite, pathlib.Path(args.source).resolve(), outcome, timeout=args.timeout,
                   case_timeout=args.case_timeout)
      save_outcome(outcome, args.sample, args.outcomes)
  else:
    with tempfile.TemporaryDirectory(prefix=f"{suite.name}_suite_") as tmp:
      root = sources(suite, args.source, pathlib.Path(tmp))
      if root is None:
        return 0
      files = args.files or suite.files(root)
      outcome = run_suite(suite, root, files, sample=args.sample, jobs=args.jobs,
                          timeout=args.timeout, case_timeout=args.case_timeout,
                          json_path=args.json)
  manifest = load_manifest(suite)
  record = report(suite, files, outcome, manifest, sample=args.sample)
  record["float64"] = args.float64
  if args.results:
    RESULTS.mkdir(exist_ok=True)
    name = f"{suite.name}-{args.part}" if args.part else suite.name
    if args.part:
      record["part"] = args.part
    (RESULTS / f"{name}.json").write_text(json.dumps(record, indent=1) + "\n")
  if args.update_manifest:
    update_manifest(suite, manifest, record)
  return 1 if record["new_failures"] and not args.update_manifest else 0


if __name__ == "__main__":
  sys.exit(main())
