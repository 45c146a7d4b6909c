"""docs/coverage.md is what hlo_lowering.coverage generates from the code, and the report's
inputs are consistent (every rule condition described, limitations name real ops)."""

import pathlib

from hlo_lowering import coverage, limitations
from hlo_lowering.lowering import registry
from hlo_lowering.pipeline import PASSES
from jax_trn import cli


REPO_DOC = pathlib.Path(__file__).resolve().parents[1] / coverage.DOC_PATH


def test_coverage_doc_is_up_to_date():
  assert coverage.check(REPO_DOC), (
      f"docs/coverage.md is out of date with the code; regenerate it with "
      f"`{coverage.REGENERATE}` (or `jax-trn coverage --write`) and commit it")


def test_every_conditional_rule_is_described():
  undescribed = [f"{op} ({rule.kind} rule {rule.fn.__module__}.{rule.fn.__name__})"
                 for op in registry.registered_ops() for rule in registry.rules_for(op)
                 if rule.conditional and not rule.condition]
  assert not undescribed, (f"give these rules `describe=` (or their `when` a docstring) so the "
                           f"coverage report can say when they apply: {undescribed}")


def test_rules_and_limitations_name_dialect_ops():
  ops = set(coverage.dialect_ops())
  assert len(ops) > 100
  stablehlo = {op for op in registry.registered_ops() if op.startswith("stablehlo.")}
  assert not stablehlo - ops, f"rules registered for misspelt ops: {stablehlo - ops}"
  named = {lim.op for lim in limitations.LIMITATIONS} - {limitations.ALL_OPS}
  assert not named - ops, f"limitations name unknown ops: {named - ops}"
  assert all(lim.kind in (limitations.GPSIMD, limitations.UNSUPPORTED)
             for lim in limitations.LIMITATIONS)


def test_whole_op_limitations_are_not_stale():
  """An op whose limitation says it is unsupported as a whole has no rule and no rewrite."""
  stale = [lim.op for lim in limitations.LIMITATIONS
           if lim.whole_op and lim.kind == limitations.UNSUPPORTED
           and coverage.op_coverage(lim.op).status != coverage.UNSUPPORTED]
  assert not stale, f"{stale} now lower: update hlo_lowering/limitations.py"


def test_rewritten_ops_name_real_passes():
  names = {p.name for p in PASSES}
  assert all(pass_name in names or pass_name == ""
             for pass_name, _ in coverage.REWRITTEN.values())


def test_summary_counts_every_op():
  rows = coverage.table()
  assert sum(coverage.summary(rows).values()) == len(rows)


def test_cli_prints_and_checks(capsys, tmp_path):
  assert cli.main(["coverage"]) == 0
  assert "| `stablehlo.dot_general` |" in capsys.readouterr().out
  out = tmp_path / "coverage.md"
  assert cli.main(["coverage", "--write", str(out)]) == 0
  assert cli.main(["coverage", "--check", str(out)]) == 0
  out.write_text("stale")
  assert cli.main(["coverage", "--check", str(out)]) == 1
  assert coverage.REGENERATE in capsys.readouterr().err
