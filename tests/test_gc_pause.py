"""The garbage collector is paused while the compiler runs (jax_trn/gc_pause.py) and resumes
afterwards, also when the compile fails, when compiles overlap, and never when it was off."""

import gc
import threading

import pytest

from hlo_lowering import compiler
from hlo_lowering.errors import CompileError
from jax_trn import compilation, gc_pause

_PROGRAM = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = stablehlo.add %x, %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
"""


@pytest.fixture(autouse=True)
def collector_on():
  gc.enable()
  yield
  gc.enable()


def test_the_compiler_runs_with_the_collector_paused(monkeypatch):
  seen = []
  compile_program = compiler.compile_program

  def recording(*args, **kwargs):
    seen.append(gc.isenabled())
    return compile_program(*args, **kwargs)

  monkeypatch.setattr(compiler, "compile_program", recording)
  assert compilation.compile_text(_PROGRAM)
  assert seen == [False] and gc.isenabled()


def test_a_failing_compile_resumes_the_collector(monkeypatch):
  def failing(*args, **kwargs):
    raise CompileError("no")

  monkeypatch.setattr(compiler, "compile_program", failing)
  with pytest.raises(CompileError):
    compilation.compile_text(_PROGRAM)
  assert gc.isenabled()


def test_overlapping_pauses_resume_when_the_last_ends():
  first_in, second_done = threading.Event(), threading.Event()
  during = []

  def first():
    with gc_pause.paused():
      first_in.set()
      second_done.wait(10)
      during.append(gc.isenabled())

  thread = threading.Thread(target=first)
  thread.start()
  first_in.wait(10)
  with gc_pause.paused():
    assert not gc.isenabled()
  second_done.set()  # the second pause ended first: the first one still holds the collector
  thread.join(10)
  assert during == [False] and gc.isenabled()


def test_a_collector_that_was_off_stays_off():
  gc.disable()
  with gc_pause.paused():
    with gc_pause.paused():
      pass
  assert not gc.isenabled()
