"""LNC=2 programs (format version 6): the streams of a trn2 device's two physical NeuronCores.

Both cores run concurrently with their own engines, SBUF and PSUM, sharing HBM; the loader
rejects streams of a core the program does not have and collectives off the first core; an
instruction that reads what the other core wrote waits for it across cores (and reads stale data
without that wait), at the cost of a cross-core hand-off."""

from __future__ import annotations

import numpy as np
import pytest

from compiler_harness import finish, native
from jax_trn import plugin
from pypjrt._loader import Plugin
from pypjrt.client import Client
from hlo_lowering.program.enums import COLLECTIVE_ALL_REDUCE
from hlo_lowering.program import (Alu, DType, HbmAP, Memory, ProgramBuilder, Scalar, TileAP,
                                  core_of, read_program)

_rng = np.random.RandomState(0)
ROWS, COLS = 128, 512


def _scale_rows(b: ProgramBuilder, x: int, y: int, rows: range, factor: float, core: int,
                split: int | None) -> None:
  """y[rows] = x[rows] * factor on `core`: load, VectorE, store."""
  tile = TileAP.dense(Memory.SBUF, DType.F32, 0, len(rows), 0, (COLS,))
  src = HbmAP(x, rows.start * COLS, ((COLS, len(rows)), (1, COLS)))
  dst = HbmAP(y, rows.start * COLS, ((COLS, len(rows)), (1, COLS)))
  with b.on_core(core, split):
    b.dma_copy(None, tile, src)
    b.tensor_scalar(Alu.MUL, tile, tile, Scalar(DType.F32, factor))
    b.dma_copy(None, dst, tile)


def _halves_program(cores: int) -> bytes:
  """y = x * 2 by row halves: on two cores (one split) or both halves on core 0."""
  b = ProgramBuilder("trn2")
  x = b.tensor("parameter", DType.F32, (ROWS, COLS), index=0)
  y = b.tensor("output", DType.F32, (ROWS, COLS), index=0)
  split = b.new_split() if cores == 2 else None
  for half in range(2):
    _scale_rows(b, x, y, range(half * 64, half * 64 + 64), 2.0, half if cores == 2 else 0, split)
  return finish(b)


def _run(program: bytes, *inputs):
  return native().run_program(program, [np.asarray(a) for a in inputs], record_timeline=True)


def test_both_cores_run_concurrently_with_their_own_engines():
  x = _rng.randn(ROWS, COLS).astype(np.float32)
  (one_core,), profile_1 = _run(_halves_program(1), x)
  program = _halves_program(2)
  (two_cores,), profile_2 = _run(program, x)
  np.testing.assert_array_equal(two_cores, x * 2)
  np.testing.assert_array_equal(one_core, two_cores)
  assert read_program(program).cores == 2
  assert {"DVE", "DVE@1"} <= set(profile_2["streams"])
  assert profile_2["streams"]["DVE"]["instructions"] == profile_2["streams"]["DVE@1"]["instructions"] == 1
  # The halves overlap: the two-core program takes less than the one-core one.
  assert profile_2["device_time_ns"] < 0.8 * profile_1["device_time_ns"]
  cores_seen = {r["stream"].endswith("@1") for r in profile_2["timeline"]}
  assert cores_seen == {False, True}


def _dependent_program() -> ProgramBuilder:
  """z = (x * 2) * 3: core 0 writes t = x * 2 whole, then core 1 reads all of t."""
  b = ProgramBuilder("trn2")
  x = b.tensor("parameter", DType.F32, (ROWS, COLS), index=0)
  t = b.tensor("temporary", DType.F32, (ROWS, COLS))
  z = b.tensor("output", DType.F32, (ROWS, COLS), index=0)
  _scale_rows(b, x, t, range(ROWS), 2.0, 0, None)
  _scale_rows(b, t, z, range(ROWS), 3.0, 1, None)
  return b


def test_a_read_of_what_the_other_core_wrote_waits_for_it():
  x = _rng.randn(ROWS, COLS).astype(np.float32)
  builder = _dependent_program()
  finish(builder)
  cross = [(inst, w) for inst in builder.instructions for w, _ in inst.waits
           if core_of(w) != core_of(inst.stream)]
  assert cross, "core 1's load of t must wait on core 0's store"
  (z,), _ = _run(builder.serialize(), x)
  np.testing.assert_array_equal(z, x * 2 * 3)
  # The same program without its cross-core waits reads t before core 0 has written it.
  for inst, _ in cross:
    inst.waits = [(w, c) for w, c in inst.waits if core_of(w) == core_of(inst.stream)]
  (racy,), _ = _run(builder.serialize(), x)
  assert not np.array_equal(racy, x * 2 * 3)


def test_a_cross_core_wait_costs_the_hand_off():
  x = _rng.randn(ROWS, COLS).astype(np.float32)
  builder = _dependent_program()
  (_,), profile = _run(finish(builder), x)
  by_stream = {}
  for r in profile["timeline"]:
    by_stream.setdefault(r["stream"], []).append(r)
  store = [r for s, rs in by_stream.items() if not s.endswith("@1") for r in rs
           if r["opcode"] == "dma_copy" and r["start_ns"] > 0][-1]
  load = min((r for s, rs in by_stream.items() if s.endswith("@1") for r in rs),
             key=lambda r: r["start_ns"])
  assert load["start_ns"] >= store["end_ns"] + 100  # ~150 ns est. beyond a same-core hand-off


def _patched_cores(program: bytes, cores: int) -> bytes:
  """`program` with its core count byte (after magic, version and target name) replaced."""
  at = 8 + 4 + 4 + len("trn2")
  return program[:at] + bytes([cores]) + program[at + 1:]


def test_loader_rejects_streams_of_a_core_the_program_does_not_have():
  program = _halves_program(2)
  with pytest.raises(Exception, match=r"stream id 2[1-9].*out of range 0\.\.20.*one physical core"):
    native().program_info(_patched_cores(program, 1))
  with pytest.raises(Exception, match="3 physical cores: a trn2 program runs on 1 to 2"):
    native().program_info(_patched_cores(program, 3))


def test_loader_rejects_a_collective_on_the_second_core():
  b = ProgramBuilder("trn2")
  x = b.tensor("parameter", DType.F32, (4,), index=0)
  y = b.tensor("output", DType.F32, (4,), index=0)
  with b.on_core(1):
    b.collective(COLLECTIVE_ALL_REDUCE, HbmAP(y, 0, ((1, 4),)), HbmAP(x, 0, ((1, 4),)),
                 groups=[[0]], op=Alu.ADD)
  with pytest.raises(Exception, match="runs on the device's first physical core"):
    native().program_info(finish(b))


def test_an_lnc1_client_refuses_a_program_for_two_cores():
  program = _halves_program(2)
  pjrt = Plugin(str(plugin.library_path()))
  pjrt.initialize()
  for lnc in (1, 2):
    client = Client(pjrt, options={"lnc": lnc})
    try:
      if lnc == 1:
        with pytest.raises(Exception, match="runs on 2 physical cores but this client's devices are LNC=1"):
          client.deserialize_executable(program)
      else:
        assert client.deserialize_executable(program) is not None
    finally:
      client.close()
