"""The op coverage report: every StableHLO op, how it lowers and when, and its known limitations.

Generated, so it cannot drift from the code:
- the op list is every op class of jaxlib's StableHLO dialect bindings
  (`jaxlib.mlir.dialects.stablehlo`, classes with an OPERATION_NAME);
- how an op lowers comes from the lowering registry (hlo_lowering/lowering/registry.py): its
  rules in the order they are tried, each with its kind and the condition it accepts (the rule's
  `describe=`, or its predicate's docstring);
- ops the pass pipeline removes before lowering are listed in REWRITTEN (checked against
  pipeline.PASSES);
- known limitations come from hlo_lowering/limitations.py;
- the figures of other projects' test suites run on trn come from tests/suites/results/
  (hlo_lowering/suite_results.py).

    python -m hlo_lowering.coverage            print the report (Markdown)
    python -m hlo_lowering.coverage --write    regenerate docs/coverage.md
    python -m hlo_lowering.coverage --check    exit 1 if docs/coverage.md is out of date
(also `jax-trn coverage`). tests/test_coverage_doc.py fails when docs/coverage.md is stale and
tests/test_coverage_claims.py compiles a program per op to check every claim.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import inspect
import pathlib
import sys

from hlo_lowering import limitations as limits
from hlo_lowering import suite_results
from hlo_lowering import lowering  # noqa: F401  (registers every rule)
from hlo_lowering.lowering import registry

NATIVE, GPSIMD, REWRITTEN_KIND, UNSUPPORTED = "native", "gpsimd", "rewritten", "unsupported"
STATUSES = (NATIVE, GPSIMD, REWRITTEN_KIND, UNSUPPORTED)
_KIND_NAMES = {NATIVE: "native", GPSIMD: "GpSimd"}
# Relative: written and checked from the repository root (an installed package has no docs/).
DOC_PATH = pathlib.Path("docs") / "coverage.md"
REGENERATE = "python -m hlo_lowering.coverage --write"

# Ops the compiler handles before codegen, so no lowering rule sees them:
# op -> (pass in pipeline.PASSES, or "" for structure; when, in words).
REWRITTEN: dict[str, tuple[str, str]] = {
    "stablehlo.batch_norm_grad": ("decompose-batch-norm", "always: the spec's reduce and "
                                                          "elementwise decomposition"),
    "stablehlo.batch_norm_inference": ("decompose-batch-norm", "always: the spec's elementwise "
                                                               "decomposition"),
    "stablehlo.batch_norm_training": ("decompose-batch-norm", "always: the spec's reduce and "
                                                              "elementwise decomposition"),
    "stablehlo.after_all": ("", "always: a token, imported as an empty constant (tokens order "
                                "host callbacks: docs/host-callbacks.md)"),
    "stablehlo.create_token": ("", "always: a token, imported as an empty constant (tokens "
                                   "order host callbacks: docs/host-callbacks.md)"),
    "stablehlo.complex": ("decompose-complex", "always: complex64 values are (real, imaginary) "
                                               "float32 pairs, and this op is the pair"),
    "stablehlo.cholesky": ("decompose-cholesky", "float operands: a loop over the factor's "
                           "columns (one matrix-vector dot each); not positive definite: NaN, "
                           "as on XLA CPU"),
    "stablehlo.composite": ("inline-calls", "always: replaced by its decomposition function"),
    "stablehlo.dot": ("", "always: imported as the dot_general it is (torch_xla's HLO protos "
                          "convert to it)"),
    "stablehlo.rng_bit_generator": ("decompose-rng-bit-generator", "u8/u16/u32/u64 bits, "
                                    "THREE_FRY with a u64[2] state, PHILOX and DEFAULT (= PHILOX, "
                                    "as on XLA CPU) with u64[2] or u64[3]: XLA's integer "
                                    "decomposition, bit-exact with XLA CPU"),
    "stablehlo.fft": ("decompose-complex", "FFT, IFFT, RFFT, IRFFT over up to 3 axes of at "
                                           "most 1024: one DFT matmul per axis over float32 "
                                           "pairs (passes/complex_fft.py)"),
    "stablehlo.reduce_precision": ("decompose-reduce-precision", "f32/bf16/f16 operands: XLA's "
                                   "integer bit decomposition (round to nearest even, overflow "
                                   "to Inf, flush below range, NaN kept), bit-exact with XLA "
                                   "CPU"),
    "stablehlo.return": ("", "always: the terminator of a region (reduce/sort/scatter bodies, "
                             "loop and branch regions), read by the op that owns the region"),
    "stablehlo.triangular_solve": ("decompose-triangular-solve", "float operands (complex64: "
                                   "decompose-complex-triangular-solve, then float32 pairs), "
                                   "every side, triangle, transpose, adjoint and unit_diagonal: a "
                                   "substitution loop over the solution's rows (one "
                                   "matrix-vector dot each)"),
    "stablehlo.while": ("unroll-static-loops", "when the condition folds to a constant every "
                                               "iteration: unrolled into copies of the body"),
}


def dialect_ops() -> list[str]:
  """Every op name of jaxlib's StableHLO dialect bindings."""
  from jaxlib.mlir.dialects import stablehlo
  return sorted({cls.OPERATION_NAME for _, cls in inspect.getmembers(stablehlo, inspect.isclass)
                 if isinstance(getattr(cls, "OPERATION_NAME", None), str)
                 and cls.OPERATION_NAME.startswith("stablehlo.")})


@dataclasses.dataclass(frozen=True)
class OpCoverage:
  op: str
  rules: tuple[tuple[str, str], ...]   # (kind, condition in words) in the order tried
  total: bool                          # some rule accepts every op of this name
  rewritten: tuple[str, str] | None    # (pass, when) from REWRITTEN
  limitations: tuple[limits.Limitation, ...]

  @property
  def kinds(self) -> tuple[str, ...]:
    """The lowering kinds some rule of the op gives ("native", "gpsimd"), in order."""
    return tuple(dict.fromkeys(kind for kind, _ in self.rules))

  @property
  def status(self) -> str:
    """The best path the op can take: native, gpsimd, rewritten or unsupported."""
    if self.kinds:
      return self.kinds[0]
    return REWRITTEN_KIND if self.rewritten else UNSUPPORTED

  def lowering(self) -> str:
    if self.kinds:
      text = " / ".join(_KIND_NAMES[k] for k in self.kinds)
      return text + (" (or rewritten)" if self.rewritten else "")
    if self.rewritten:
      return f"rewritten ({self.rewritten[0]})" if self.rewritten[0] else "structural"
    return "**unsupported**"

  def conditions(self) -> str:
    parts = []
    if self.rewritten:
      parts.append(f"{self.rewritten[0] or 'structure'}: {self.rewritten[1]}")
    for kind, condition in self.rules:
      parts.append(f"{_KIND_NAMES[kind]}: {condition or 'always'}")
    if self.rules and not self.total:
      parts.append("otherwise: CompileError")
    if not self.rules and not self.rewritten:
      parts.append("CompileError naming the op")
    return "; ".join(parts)


def op_coverage(op: str) -> OpCoverage:
  rules = registry.rules_for(op)
  total = any(not rule.conditional or rule.condition.startswith("always") for rule in rules)
  return OpCoverage(op, tuple((rule.kind, rule.condition) for rule in rules), total,
                    REWRITTEN.get(op), tuple(limits.for_op(op)))


def table() -> list[OpCoverage]:
  """Every dialect op, plus any stablehlo.* op that has rules but is not in the dialect (a typo)."""
  names = sorted(set(dialect_ops()) | set(REWRITTEN)
                 | {op for op in registry.registered_ops() if op.startswith("stablehlo.")})
  return [op_coverage(op) for op in names]


def internal_ops() -> list[OpCoverage]:
  """Ops with rules that are not StableHLO ops (created by passes, e.g. trn.fusion)."""
  return [op_coverage(op) for op in registry.registered_ops() if not op.startswith("stablehlo.")]


def summary(rows: list[OpCoverage] | None = None) -> dict[str, int]:
  counts = collections.Counter(row.status for row in (rows or table()))
  return {status: counts.get(status, 0) for status in STATUSES}


def _cell(text: str) -> str:
  return text.replace("|", "\\|")


def _results_beside(doc: pathlib.Path) -> pathlib.Path:
  """The suite runners' results of the checkout holding `doc` (docs/coverage.md ->
  tests/suites/results): the same text wherever this package is imported from."""
  return doc.resolve().parent.parent / "tests" / "suites" / "results"


def render(rows: list[OpCoverage] | None = None,
           results_dir: pathlib.Path = suite_results.RESULTS_DIR) -> str:
  """docs/coverage.md."""
  rows = rows or table()
  counts = summary(rows)
  lines = [
      "# Op coverage",
      "",
      f"<!-- Generated by `{REGENERATE}` (hlo_lowering/coverage.py); do not edit. -->",
      "",
      "Every op of the StableHLO dialect (as jaxlib's bindings list it), how the compiler lowers "
      "it and under which conditions, generated from the lowering registry "
      "(`hlo_lowering/lowering/`), the pass pipeline and the known-limitations table "
      "(`hlo_lowering/limitations.py`). `tests/test_coverage_claims.py` compiles a program per op "
      "and checks each claim against the compile report.",
      "",
      f"**{len(rows)} ops: {counts[NATIVE]} native, {counts[GPSIMD]} GpSimd only, "
      f"{counts[REWRITTEN_KIND]} rewritten before lowering, {counts[UNSUPPORTED]} unsupported.**",
      "",
      "- **native**: tiled on TensorE/VectorE/ScalarE with DMA, or a view that moves no data.",
      "- **GpSimd**: GpSimd general-purpose instructions over HBM: correct but slow; the compile "
      "report (`jax_trn.compile_report()`, logged at INFO) lists the source line of every such op. "
      "Strict mode (`TRN_STRICT=1` or `jax_trn.configure(strict=True)`) makes any such op a "
      "compile error that lists each one with its source line.",
      "- **rewritten**: a pass replaces the op before lowering (the pass is named).",
      "- **unsupported**: compiling it raises `CompileError` naming the op, its types and the "
      "source line (docs/adding-an-op.md says how to add it).",
      "",
      "Rules are tried in the order shown (native first); \"otherwise: CompileError\" means no "
      "rule accepts the remaining forms. Ops with a zero-size result emit nothing (\"empty\" in "
      "the compile report), and integer/bool ops over small constants fold at compile time.",
      "",
      "## Ops",
      "",
      "| op | lowering | when | known limitations |",
      "|---|---|---|---|",
  ]
  for row in rows:
    notes = "; ".join(f"{lim.condition}: {lim.reason}" for lim in row.limitations)
    lines.append(f"| `{row.op}` | {row.lowering()} | {_cell(row.conditions())} | "
                 f"{_cell(notes)} |")
  internal = internal_ops()
  if internal:
    lines += ["", "## Compiler-internal ops", "",
              "Ops that passes create and rules lower; they never come from JAX.", "",
              "| op | lowering | when |", "|---|---|---|"]
    for row in internal:
      lines.append(f"| `{row.op}` | {row.lowering()} | {_cell(row.conditions())} |")
  lines += [
      "",
      "## Known limitations",
      "",
      "From `hlo_lowering.limitations.LIMITATIONS`; tests skip or xfail the cases these entries "
      "cover through `limitations.marks()`. An op listed as unsupported above without an entry "
      "here simply has no lowering rule yet.",
      "",
      "| op | condition | result | reason |",
      "|---|---|---|---|",
  ]
  for lim in limits.LIMITATIONS:
    op = "all ops" if lim.op == limits.ALL_OPS else f"`{lim.op}`"
    result = "GpSimd (slow)" if lim.kind == limits.GPSIMD else "unsupported"
    lines.append(f"| {op} | {_cell(lim.condition)} | {result} | {_cell(lim.reason)} |")
  suites = suite_results.render(results_dir)
  if suites:
    lines += [""] + suites[:-1]  # the section ends with a blank line; the file with one newline
  return "\n".join(lines) + "\n"


def check(path: pathlib.Path = DOC_PATH) -> bool:
  """Whether `path` holds exactly what `render()` generates (with the results of its checkout)."""
  return path.exists() and path.read_text() == render(results_dir=_results_beside(path))


def add_arguments(parser: argparse.ArgumentParser) -> None:
  group = parser.add_mutually_exclusive_group()
  group.add_argument("--write", nargs="?", const=str(DOC_PATH), metavar="PATH",
                     help=f"write the report (default {DOC_PATH.name} in docs/)")
  group.add_argument("--check", nargs="?", const=str(DOC_PATH), metavar="PATH",
                     help="exit 1 if the written report is out of date")


def run(args: argparse.Namespace) -> int:
  if args.check:
    if check(pathlib.Path(args.check)):
      print(f"{args.check} is up to date")
      return 0
    print(f"{args.check} is out of date with the code; regenerate it with `{REGENERATE}`",
          file=sys.stderr)
    return 1
  if args.write:
    path = pathlib.Path(args.write)
    path.write_text(render(results_dir=_results_beside(path)))
    counts = summary()
    print(f"wrote {args.write}: " + ", ".join(f"{counts[s]} {s}" for s in STATUSES))
    return 0
  print(render(), end="")
  return 0


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(prog="python -m hlo_lowering.coverage",
                                   description=__doc__.splitlines()[0])
  add_arguments(parser)
  return run(parser.parse_args(argv))


if __name__ == "__main__":
  sys.exit(main())
