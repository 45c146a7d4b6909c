"""The compile report says where the compile time went (import, passes, lowering, each back-end
stage) and how many instructions each engine and DMA queue got, counted from the program."""

import collections

import jax.numpy as jnp
import numpy as np

import compiler_harness as harness
from hlo_lowering import backend
from hlo_lowering.program.enums import stream_name
from hlo_lowering.program.reader import read_program
from jax_trn import compilation


def _layer(x, w):
  return jnp.tanh(x @ w) * 2.0


def test_compile_time_is_split_into_phases_and_stages():
  harness.compile_fn(_layer, np.ones((128, 256), np.float32), np.ones((256, 64), np.float32))
  report = compilation.last_report()
  assert list(report.phase_seconds) == ["import", "passes", "lowering", "backend"]
  assert list(report.stage_seconds) == [stage.name for stage in backend.STAGES]
  assert all(t >= 0 for t in (*report.phase_seconds.values(), *report.stage_seconds.values()))
  # The back-end phase holds its stages (and serializing).
  assert sum(report.stage_seconds.values()) <= report.phase_seconds["backend"]
  assert "instructions: " in report.format() and " PE " in report.format()
  assert "compile time" not in report.format()  # the content; str() adds this compile's times
  assert "back-end stages: " in str(report) and str(report).startswith(report.format())


def test_instruction_counts_per_stream_are_the_programs():
  program = harness.compile_fn(_layer, np.ones((128, 256), np.float32),
                               np.ones((256, 64), np.float32))
  counts = collections.Counter(
      stream_name(stream) for block in read_program(program).blocks
      for stream, insts in block.streams.items() for _ in insts)
  report = compilation.last_report()
  assert report.instructions_per_stream == dict(counts)
  assert report.instructions_per_stream["PE"] > 0 and report.instructions_per_stream["ACT"] > 0
  assert any(name.startswith("DMA") for name in report.instructions_per_stream)


def test_a_cache_hit_has_no_compile_time_and_the_same_content(tmp_path, monkeypatch):
  monkeypatch.setenv("TRN_CACHE_DIR", str(tmp_path))
  x, w = np.ones((128, 64), np.float32), np.ones((64, 32), np.float32)
  harness.compile_fn(_layer, x, w)
  compiled = compilation.last_report()
  harness.compile_fn(_layer, x, w)
  served = compilation.last_report()
  assert compiled.phase_seconds and not served.phase_seconds and not served.stage_seconds
  assert served == compiled and served.format() == compiled.format()
  assert served.instructions_per_stream == compiled.instructions_per_stream
  assert "served from the compile cache" in str(served)
