"""Follows docs/adding-an-op.md so the document cannot drift from the code."""

import pathlib
import re

import jax
import numpy as np

import compiler_harness as harness
from hlo_lowering import compiler
from jax_trn import config

ROOT = pathlib.Path(__file__).parent.parent
DOC = ROOT / "docs" / "adding-an-op.md"
RULE = ROOT / "hlo_lowering" / "lowering" / "barrier.py"


def _doc_python_blocks():
  return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_doc_shows_the_rule_verbatim():
  assert RULE.read_text() in _doc_python_blocks()


def test_step_1_jax_emits_the_op():
  x = np.ones((3, 130), np.float32)
  text = jax.jit(lambda x, y: jax.lax.optimization_barrier((x * 2, y))).lower(x, x).as_text()
  assert "stablehlo.optimization_barrier" in text


def test_steps_3_and_4_compile_report_and_run():
  f = lambda x, y: jax.lax.optimization_barrier((x * 2, y))
  x = np.arange(390, dtype=np.float32).reshape(3, 130)
  program, report = compiler.compile_program(harness.artifact(f, x, x), "mlir",
                                             compiler.CompileOptions(), config.target_spec("trn2"))
  assert report.summary()["stablehlo.optimization_barrier"] == {"native": 1}
  assert program == harness.compile_fn(f, x, x)
  harness.check(f, x, x)
