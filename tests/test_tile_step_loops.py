"""Loops that step tile addresses (program format version 7, step kind 3): a loop whose
iterations differ by their SBUF/PSUM offsets or partitions — K tiles of one accumulation, buffers
that rotate every `period` iterations — computes bit for bit what its unrolled form computes, in
the same modeled cycles; a wrong stride or rotation changes the result; the loader checks every
moved tile at the loop's corners and names the iteration."""

from __future__ import annotations

import struct

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from compiler_harness import artifact, compile_code, finish, native, through_backend
from hlo_lowering.program import (Alu, DType, HbmAP, Memory, Opcode, ProgramBuilder, Scalar,
                                  TileAP, disassemble, read_program)
from hlo_lowering.program.instructions import TileStep
from hlo_lowering.program.writer import serialize

_rng = np.random.RandomState(0)
F32 = 4


def _k_accumulation(looped: bool, k_tiles=6, m=64, n=96):
  """out[m, n] = Σ over K tiles of lhsT[k, m]ᵀ · rhs[k, n]: every K tile loaded into its own
  SBUF slot, multiplied into one PSUM bank (start on the first, stop on the last); the middle K
  tiles' loads and matmuls are one loop stepping their HBM offsets and SBUF offsets."""
  b = ProgramBuilder()
  k = 128 * k_tiles
  lhs = b.tensor("parameter", DType.F32, (k, m), index=0, name="lhsT")
  rhs = b.tensor("parameter", DType.F32, (k, n), index=1, name="rhs")
  out = b.tensor("output", DType.F32, (m, n), index=0, name="out")
  lhs_at, rhs_at = 0, k_tiles * m * F32
  bank = TileAP.dense(Memory.PSUM, DType.F32, 0, m, 0, (n,))

  def k_tile(i, steps=None):
    stationary = TileAP.dense(Memory.SBUF, DType.F32, 0, 128, lhs_at + i * m * F32, (m,))
    moving = TileAP.dense(Memory.SBUF, DType.F32, 0, 128, rhs_at + i * n * F32, (n,))
    b.dma_copy(0, stationary, HbmAP.dense(lhs, (128, m), offset=i * 128 * m),
               steps=steps and {"src": 128 * m, ("dst", "byte_offset"): m * F32})
    b.dma_copy(1, moving, HbmAP.dense(rhs, (128, n), offset=i * 128 * n),
               steps=steps and {"src": 128 * n, ("dst", "byte_offset"): n * F32})
    b.matmul(bank, stationary, moving, start=i == 0, stop=i == k_tiles - 1,
             steps=steps and {("stationary", "byte_offset"): m * F32,
                              ("moving", "byte_offset"): n * F32})

  k_tile(0)
  if looped:
    with b.loop(k_tiles - 2):
      k_tile(1, steps=True)
  else:
    for i in range(1, k_tiles - 1):
      k_tile(i)
  k_tile(k_tiles - 1)
  result = TileAP.dense(Memory.SBUF, DType.F32, 0, m, rhs_at + k_tiles * n * F32, (n,))
  b.tensor_copy(result, bank)
  b.dma_copy(2, HbmAP.dense(out, (m, n)), result)
  return b


def _rotating(looped: bool, tiles=9, rows=32, cols=64, period=2, load_period=None):
  """out = x · 2 + 1 in `tiles` row tiles, double-buffered: tile i loads into SBUF slot
  i mod `period`, VectorE scales it into result slot i mod `period`, a DMA stores it. Looped:
  one body whose tiles rotate (`load_period`: the loads' rotation, to make it wrong)."""
  b = ProgramBuilder()
  x = b.tensor("parameter", DType.F32, (tiles * rows, cols), index=0, name="x")
  out = b.tensor("output", DType.F32, (tiles * rows, cols), index=0, name="out")
  slot = cols * F32

  def tile(i, steps=None):
    load = TileAP.dense(Memory.SBUF, DType.F32, 0, rows, (i % period) * slot, (cols,))
    result = TileAP.dense(Memory.SBUF, DType.F32, 0, rows, (period + i % period) * slot, (cols,))
    rotate = TileStep(slot, period)
    b.dma_copy(0, load, HbmAP.dense(x, (rows, cols), offset=i * rows * cols),
               steps=steps and {"src": rows * cols, ("dst", "byte_offset"): TileStep(
                   slot, period if load_period is None else load_period)})
    b.tensor_scalar(Alu.MUL, result, load, Scalar(DType.F32, 2.0),
                    steps=steps and {("dst", "byte_offset"): rotate,
                                     ("src", "byte_offset"): rotate})
    b.tensor_scalar(Alu.ADD, result, result, Scalar(DType.F32, 1.0),
                    steps=steps and {("dst", "byte_offset"): rotate,
                                     ("src", "byte_offset"): rotate})
    b.dma_copy(1, HbmAP.dense(out, (rows, cols), offset=i * rows * cols), result,
               steps=steps and {"dst": rows * cols, ("src", "byte_offset"): rotate})

  if looped:
    with b.loop(tiles):
      tile(0, steps=True)
  else:
    for i in range(tiles):
      tile(i)
  return b


# Matmuls of many K tiles: the middle K tiles' matmuls and each PSUM bank's transposes are loops
# stepping their SBUF/PSUM offsets (lowering/matmul_resident.py).
MATMULS = {
    "f32 x @ w, K of 8 tiles": (lambda x, w: x @ w,
                                (_rng.randn(700, 1024).astype(np.float32),
                                 _rng.randn(1024, 200).astype(np.float32))),
    "bf16 x @ w.T, K of 6 tiles": (lambda x, w: x @ w.T,
                                   (_rng.randn(900, 768).astype(ml_dtypes.bfloat16),
                                    _rng.randn(300, 768).astype(ml_dtypes.bfloat16))),
    # Many m-tiles, many heads: loops of more than five iterations around the K-tile loops,
    # whose waits insert-semaphores derives from a few of their iterations.
    "bf16 x @ w, 24 m-tiles of K of 6 tiles": (
        lambda x, w: x @ w, (_rng.randn(3000, 768).astype(ml_dtypes.bfloat16),
                             _rng.randn(768, 256).astype(ml_dtypes.bfloat16))),
    "bf16 attention values over 16 heads": (
        lambda a, v: jnp.einsum("bmk,bkn->bmn", a, v),
        (_rng.randn(16, 1024, 640).astype(ml_dtypes.bfloat16),
         _rng.randn(16, 640, 64).astype(ml_dtypes.bfloat16))),
    # K past what a resident panel holds: the key-cached schedule (lowering/matmul.py).
    "bf16 x @ w, K of 128 tiles in chunks": (
        lambda x, w: x @ w, (_rng.randn(256, 16384).astype(ml_dtypes.bfloat16),
                             _rng.randn(16384, 128).astype(ml_dtypes.bfloat16))),
    "bf16 attention values over 6 heads": (
        lambda a, v: jnp.einsum("bmk,bkn->bmn", a, v),
        (_rng.randn(6, 384, 768).astype(ml_dtypes.bfloat16),
         _rng.randn(6, 768, 64).astype(ml_dtypes.bfloat16))),
    # A weight gradient's K of 16 tiles over two N panels: each panel's rows load in groups of
    # four K tiles (one per panel queue), the lhs^T per K tile, and the first and last m-tiles'
    # matmuls, which follow the panel's rows, loop over such groups.
    "bf16 x.T @ w, K of 16 tiles over two N panels": (
        lambda x, w: x.T @ w, (_rng.randn(2048, 1024).astype(ml_dtypes.bfloat16),
                               _rng.randn(2048, 3584).astype(ml_dtypes.bfloat16))),
    # K of 64 tiles: the first two m-tiles' lhs^T loads come by the back end's round robin, so
    # they loop a load per queue at a time, and the matmuls of those m-tiles (multiplied
    # together) loop over groups of as many K tiles; one m-tile alone does the same.
    "bf16 x.T @ w, K of 64 tiles, two m-tiles": (
        lambda x, w: x.T @ w, (_rng.randn(8192, 256).astype(ml_dtypes.bfloat16),
                               _rng.randn(8192, 512).astype(ml_dtypes.bfloat16))),
    "bf16 x.T @ w, K of 64 tiles, one m-tile": (
        lambda x, w: x.T @ w, (_rng.randn(8192, 128).astype(ml_dtypes.bfloat16),
                               _rng.randn(8192, 512).astype(ml_dtypes.bfloat16))),
}


def _compiled(f, args, monkeypatch, unroll: bool):
  with monkeypatch.context() as m:
    m.setenv("TRN_UNROLL_LOOPS", "1" if unroll else "0")
    program = compile_code(artifact(f, *args))
  outputs, profile = native().run_program(program, [np.asarray(a) for a in args])
  return program, outputs, profile["device_time_ns"]


@pytest.mark.parametrize("name", MATMULS)
def test_matmul_tile_loops_compute_what_the_unrolled_matmul_does_in_the_same_cycles(
    name, monkeypatch):
  f, args = MATMULS[name]
  looped, out_loop, cycles_loop = _compiled(f, args, monkeypatch, unroll=False)
  unrolled, out_unrolled, cycles_unrolled = _compiled(f, args, monkeypatch, unroll=True)
  for a, b in zip(out_loop, out_unrolled):
    assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
  assert cycles_loop == cycles_unrolled
  assert "step[" in disassemble(looped) and _stored(looped) < _stored(unrolled)


@pytest.mark.parametrize("name", MATMULS)
def test_matmul_tile_loop_waits_pass_the_back_end_verifier(name, monkeypatch):
  monkeypatch.setenv("TRN_VERIFY_IR", "1")  # checks every iteration's order, as it runs
  f, args = MATMULS[name]
  program, _, _ = _compiled(f, args, monkeypatch, unroll=False)
  assert "step[" in disassemble(program)


def _run(builder: ProgramBuilder, args):
  program = finish(builder)
  outputs, profile = native().run_program(program, [np.asarray(a) for a in args])
  return program, outputs, profile["device_time_ns"]


def _stored(program: bytes) -> int:
  return sum(len(block.instructions) for block in read_program(program).blocks)


@pytest.mark.parametrize("name,m_tiles", [("bf16 x.T @ w, K of 64 tiles, two m-tiles", 2),
                                          ("bf16 x.T @ w, K of 64 tiles, one m-tile", 1)])
def test_long_k_first_steps_store_fewer_lhs_loads_and_matmuls_than_their_k_tiles(
    name, m_tiles, monkeypatch):
  """Each of the first steps loads all 64 K tiles of its m-tile's lhs^T and multiplies each
  (one n-block of 512 columns): unrolled, 64 stored loads and 64 matmuls per m-tile."""
  f, args = MATMULS[name]
  program, _, _ = _compiled(f, args, monkeypatch, unroll=False)
  insts = [i for block in read_program(program).blocks for i in block.instructions]
  lhs_loads = [i for i in insts if i.opcode == Opcode.DMA_COPY
               and isinstance(i.operands["src"], HbmAP) and i.operands["src"].tensor == 0]
  matmuls = [i for i in insts if i.opcode == Opcode.MATMUL]
  assert len(lhs_loads) < 64 * m_tiles and len(matmuls) < 64 * m_tiles


def test_a_k_tile_loop_accumulates_what_the_unrolled_k_tiles_do_in_the_same_cycles():
  lhs, rhs = _rng.randn(768, 64).astype(np.float32), _rng.randn(768, 96).astype(np.float32)
  looped, (out_loop,), cycles_loop = _run(_k_accumulation(True), [lhs, rhs])
  unrolled, (out_unrolled,), cycles_unrolled = _run(_k_accumulation(False), [lhs, rhs])
  assert out_loop.tobytes() == out_unrolled.tobytes()
  np.testing.assert_allclose(out_loop, lhs.T.astype(np.float64) @ rhs, rtol=1e-4, atol=1e-4)
  assert cycles_loop == cycles_unrolled
  assert _stored(looped) < _stored(unrolled)
  assert "step[@+256i]" in disassemble(looped)


@pytest.mark.parametrize("tiles,period", [(9, 2), (10, 3), (2, 2)])
def test_rotating_buffers_compute_what_the_unrolled_tiles_do_in_the_same_cycles(tiles, period):
  x = _rng.randn(tiles * 32, 64).astype(np.float32)
  looped, (out_loop,), cycles_loop = _run(_rotating(True, tiles, period=period), [x])
  _, (out_unrolled,), cycles_unrolled = _run(_rotating(False, tiles, period=period), [x])
  np.testing.assert_array_equal(out_loop, x * np.float32(2) + np.float32(1))
  assert out_loop.tobytes() == out_unrolled.tobytes()
  assert cycles_loop == cycles_unrolled


def test_a_wrong_rotation_changes_the_result():
  """The check above can fail: loads rotating over three slots while the compute reads two."""
  x = _rng.randn(9 * 32, 64).astype(np.float32)
  _, (out,), _ = _run(_rotating(True, load_period=3), [x])
  assert not np.array_equal(out, x * np.float32(2) + np.float32(1))


def test_dropping_the_wait_steps_of_a_rotating_loop_races():
  """Without their per-iteration wait steps the loads overwrite a slot its store still reads."""
  b = through_backend(_rotating(True, tiles=12))
  dropped = 0
  for inst in b.instructions:
    for loop in inst.loops():
      dropped += len(inst.steps_of(loop)[1])
      inst.steps_of(loop)[1].clear()
  assert dropped
  x = _rng.randn(12 * 32, 64).astype(np.float32)
  program = serialize(b.target, b.tensors, b.blocks, b.debug_entries, b.source)
  (out,), _ = native().run_program(program, [x])
  assert not np.array_equal(out, x * np.float32(2) + np.float32(1))


def test_a_tile_stepped_program_reads_back_byte_for_byte_and_disassembles_its_rotation():
  program = finish(_rotating(True))
  read = read_program(program)
  assert serialize(read.target, read.tensors, read.blocks, read.debug, read.source) == program
  # Peeled: the loop starts a whole rotation on.
  assert "step[@+256i%2~0]" in disassemble(program)


def _tampered(change, builder=None) -> bytes:
  b = through_backend(builder or _rotating(True))
  change([inst for inst in b.instructions if inst.loop is not None])
  return serialize(b.target, b.tensors, b.blocks, b.debug_entries, b.source)


def _rejected(program: bytes, match: str) -> None:
  with pytest.raises(Exception, match=match):
    native().program_info(program)


def _set_step(key, step):
  """Sets `key`'s step on the loop's load (a DMA whose SBUF destination rotates)."""
  def change(body):
    inst = next(inst for inst in body if ("dst", "byte_offset") in inst.steps)
    inst.steps[key] = step
  return change


def test_the_loader_names_the_iteration_where_a_stepped_tile_leaves_sbuf():
  _rejected(_tampered(_set_step(("dst", "byte_offset"), TileStep(60000))),
            r"byte offset \d+ \(step 60000\) at iteration 6 of 7: SBUF access pattern")


def test_the_loader_rejects_a_partition_step_that_breaks_the_partition_rules():
  _rejected(_tampered(_set_step(("dst", "partition_start"), TileStep(16))),
            "32 partitions moves by multiples of 32 partitions")


def test_the_loader_rejects_a_psum_step_that_leaves_its_bank():
  def change(body):
    inst = next(inst for inst in body if inst.opcode.name == "MATMUL")
    inst.steps[("dst", "byte_offset")] = TileStep(1800)
  _rejected(_tampered(change, _k_accumulation(True)), "leaves its bank")


def _as_version(program: bytes, version: int) -> bytes:
  return program[:8] + struct.pack("<I", version) + program[12:]


def test_a_version_6_program_still_loads_and_a_tile_step_needs_version_7():
  """Version 7 only adds step kind 3: a program without tile steps is a version 6 program."""
  x = _rng.randn(9 * 32, 64).astype(np.float32)
  plain = finish(_rotating(False))
  (out,), _ = native().run_program(_as_version(plain, 6), [x])
  np.testing.assert_array_equal(out, x * np.float32(2) + np.float32(1))
  _rejected(_as_version(finish(_rotating(True)), 6), "3 tile field from version 7 on")
