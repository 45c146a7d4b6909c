"""Compile reports: how each op of a compiled program was lowered (tiled on the engines, or a
GpSimd general-purpose fallback), with the user's source lines, so slow paths are visible."""

from __future__ import annotations

from hlo_lowering.report import CompileReport
from jax_trn import compilation


def compile_report() -> CompileReport | None:
  """The report of the most recent trn compilation in this process (None before the first)."""
  return compilation.last_report()


def compile_reports() -> list[CompileReport]:
  """Every trn compile report of this process, oldest first."""
  return compilation.reports()
