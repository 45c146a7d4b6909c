"""Compile reports: how each op of a compiled program was lowered (tiled on the engines, or a
GpSimd general-purpose fallback), with the user's source lines, so slow paths are visible."""

from __future__ import annotations


def compile_report():
  """The report of the most recent trn compilation in this process (None before the first)."""
  from hlo_lowering import driver
  return driver.last_report()


def compile_reports() -> list:
  """Every trn compile report of this process, oldest first."""
  from hlo_lowering import driver
  return driver.reports()
