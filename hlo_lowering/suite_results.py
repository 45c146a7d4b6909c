"""The "Suites we did not write" section of docs/coverage.md, from the runners' committed results.

tests/suites/jax_library_suite.py `<suite> --results` writes tests/suites/results/<suite>.json
(per test file: passed / failed / skipped on trn and on the CPU, and how many of the tests that
pass on the CPU pass on trn; the failure categories of the suite's manifest), or, for a part of a
suite run apart (`--part`, such as Flax's nnx tests), results/<suite>-<part>.json. This module turns
those files into Markdown, so the published figures are always the measured ones. An installed
package has no tests/ directory: the section is then left out.
"""

from __future__ import annotations

import json
import pathlib

RESULTS_DIR = pathlib.Path(__file__).resolve().parents[1] / "tests" / "suites" / "results"
RUN = "python tests/suites/jax_library_suite.py"


def _counts(c: dict[str, int]) -> str:
  return f"{c['passed']} / {c['failed']} / {c['skipped']}"


def _percent(part: int, whole: int) -> str:
  return f"{100 * part / whole:.1f} %" if whole else "–"


def _suite(record: dict) -> list[str]:
  files = record["files"]
  ran = {name: f["both_passed"] + f["trn_failed"] for name, f in files.items()}
  both = sum(f["both_passed"] for f in files.values())
  skipped = sum(f["trn_skipped"] for f in files.values())
  absent = sum(f["trn_absent"] for f in files.values())
  sample = record["sample_one_in"]
  scope = "every test" if sample == 1 else f"a sample of about one test in {sample} (by test id)"
  part = record.get("part")
  float64 = (" --float64 float32" if record.get("float64") == "float32" else "")
  if float64:
    scope += ", float64 computed as float32 on trn (TRN_FLOAT64=float32)"
  lines = [
      f"### {record['suite']} {record['version']}" + (f" ({part})" if part else ""),
      "",
      f"`{RUN} {record['suite']}{f' --part {part}' if part else ''}{float64} --results`, "
      f"{scope}: "
      f"**trn passes {both} of the "
      f"{sum(ran.values())} tests that pass on the CPU and run on trn "
      f"({_percent(both, sum(ran.values()))}).** Of the other tests that pass on the CPU, "
      f"{skipped} skip themselves on trn (tests of CPU-only behaviour) and {absent} are absent "
      "from trn's run (not collected there, or the file ran past the runner's time limit).",
      "",
      "| file | trn passed / failed / skipped | CPU passed / failed / skipped | trn passes, of "
      "CPU passes run on trn | share |",
      "|---|---|---|---|---|",
  ]
  for name, f in files.items():
    lines.append(f"| `{name}` | {_counts(f['trn'])} | {_counts(f['cpu'])} | "
                 f"{f['both_passed']} / {ran[name]} | {_percent(f['both_passed'], ran[name])} |")
  if record["not_measured"]:
    lines += ["", "Not measured (not reached in this run, or no test of the file in the "
                  "sample): " + ", ".join(f"`{name}`" for name in record["not_measured"]) + "."]
  if record["categories"]:
    lines += ["", "Tests that pass on the CPU and fail on trn, by reason (the suite's manifest, "
                  f"tests/suites/manifests/{record['suite']}.json):", "",
              "| reason | tests |", "|---|---|"]
    lines += [f"| {reason.replace('|', '/')} | {count} |"
              for reason, count in record["categories"].items()]
  return lines + [""]


def render(results_dir: pathlib.Path = RESULTS_DIR) -> list[str]:
  """The section's Markdown lines; none when there are no results (an installed package)."""
  paths = sorted(results_dir.glob("*.json")) if results_dir.is_dir() else []
  if not paths:
    return []
  lines = [
      "## Suites we did not write",
      "",
      "Other projects' own test files run unedited on trn and on the CPU backend "
      f"(`{RUN}`, docs/developing.md); the figures below are the committed results of the last "
      "run (tests/suites/results/). Failures are counted over the tests that pass on the CPU.",
      "",
  ]
  for path in paths:
    lines += _suite(json.loads(path.read_text()))
  return lines
