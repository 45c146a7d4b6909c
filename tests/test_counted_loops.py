"""Counted loops (program format version 4): a loop-form program computes bit for bit what its
unrolled form (TRN_UNROLL_LOOPS=1, the code generation before loops) computes, in the same
modeled cycles, with fewer instructions; the loader rejects malformed loops with clear errors."""

from __future__ import annotations

import contextlib
import dataclasses

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from compiler_harness import artifact, compile_code, finish, native
from hlo_lowering.program import (Alu, DType, HbmAP, Memory, ProgramBuilder, Scalar, Stream,
                                  TileAP, read_program)
from hlo_lowering.program.writer import loop_runs, serialize
from jax_trn import compilation

_rng = np.random.RandomState(0)


def _f32(*shape):
  return _rng.randn(*shape).astype(np.float32)


# Broadcast operands keep rows and columns apart, so these run many small tiles (fast to
# simulate) and the loops hold many periods; odd row counts leave a partial tile after the loop.
CORPUS = {
    "add a row vector (f32)": (lambda x, b: x + b, (_f32(8192 + 37, 16), _f32(16))),
    "fused chain with a convert to bf16": (
        lambda x, b: (jnp.tanh(x * b + 1.0) - x).astype(jnp.bfloat16),
        (_f32(20000, 12), _f32(12))),
    "bf16 multiply by a column": (
        lambda x, c: x * c,
        (_f32(6500, 24).astype(ml_dtypes.bfloat16), _f32(6500, 1).astype(ml_dtypes.bfloat16))),
    "int32 select and shift": (
        lambda x, b: jnp.where(x > b, x << 2, x - b),
        (_rng.randint(-1000, 1000, (12000, 8)).astype(np.int32),
         _rng.randint(-1000, 1000, (8,)).astype(np.int32))),
    "3-d batch broadcast": (lambda x, b: jnp.maximum(x, b), (_f32(6, 2000, 10), _f32(1, 1, 10))),
    # Few long rows: each row's columns are split over the partitions (tiling.py).
    "few long rows scaled per row": (lambda x, c: x * c, (_f32(100, 128 * 128), _f32(100, 1))),
    # The mask is computed on chip (affine_select): its base steps with the loop.
    "causal mask over heads": (
        lambda s: jnp.where(jnp.tril(jnp.ones((256, 256), bool)), s, np.float32(-1e9)),
        (_f32(40, 256, 256),)),
    # A head of 80 row tiles (10 periods): the mask's offsets restart every head, so a loop
    # over the heads holds the loop over each head's periods (tile_loops.loop_plan).
    "causal mask over heads of whole periods (nested loops)": (
        lambda s: jnp.where(jnp.tril(jnp.ones((10240, 16), bool)), s, np.float32(-1e9)) * 2.0,
        (_f32(10, 10240, 16),)),
    # A head of 28 row tiles (3 periods and 4): the loop's body is two heads, each its periods'
    # loop and its 4 tiles after it.
    "causal mask over heads of 3.5 periods (nested loops and runs)": (
        lambda s: jnp.where(jnp.tril(jnp.ones((3584, 16), bool)), s, np.float32(-1e9)) * 2.0,
        (_f32(6, 3584, 16),)),
    "iota-derived values stored": (
        lambda x: x + jnp.arange(64, dtype=jnp.int32) * 3 - 7,
        (_rng.randint(-1000, 1000, (30000, 64)).astype(np.int32),)),
    # Reductions over rows (the rows layout: 128 rows a block, a period of 80 blocks on trn2).
    "row sums with an init value": (
        lambda x: jax.lax.reduce(x, np.float32(0.5), jax.lax.add, (1,)), (_f32(31000, 16),)),
    "bf16 row max": (lambda x: jnp.max(x, axis=-1),
                     (_f32(31000, 8).astype(ml_dtypes.bfloat16),)),
    "layer norm": (
        lambda x: (x - x.mean(-1, keepdims=True)) * jax.lax.rsqrt(x.var(-1, keepdims=True) + 1e-5),
        (_f32(31000, 16),)),
    # Matmuls stream the lhs one 128-row m-tile a step past a resident rhs panel (two steps a
    # period, after the first two m-tiles multiplied together): a partial last m-tile, an rhs
    # transposed on TensorE, an lhs loaded as lhs^T, fp8 operands, a batch, two N panels.
    "f32 matmul with a partial last m-tile": (lambda x, w: x @ w, (_f32(1500, 96), _f32(96, 40))),
    "bf16 x @ w.T": (lambda x, w: x @ w.T, (_f32(1300, 200).astype(ml_dtypes.bfloat16),
                                           _f32(300, 200).astype(ml_dtypes.bfloat16))),
    "f32 x.T @ w": (lambda x, w: x.T @ w, (_f32(136, 1200), _f32(136, 64))),
    "fp8 matmul into f32": (
        lambda x, w: jnp.dot(x, w, preferred_element_type=jnp.float32),
        (_f32(1500, 256).astype(ml_dtypes.float8_e4m3fn),
         _f32(256, 600).astype(ml_dtypes.float8_e4m3fn))),
    "batched matmul": (lambda x, w: jnp.einsum("bmk,bkn->bmn", x, w),
                       (_f32(2, 1300, 64), _f32(2, 64, 80))),
    # Many small batches (attention's heads) loop over pairs of batches instead.
    "q @ k.T over 8 heads": (lambda q, k: jnp.einsum("bmk,bnk->bmn", q, k),
                             (_f32(8, 300, 64), _f32(8, 300, 64))),
    "bf16 attn @ v over 7 heads (one left after the pairs)": (
        lambda a, v: jnp.einsum("bmk,bkn->bmn", a, v),
        (_f32(7, 256, 256).astype(ml_dtypes.bfloat16), _f32(7, 256, 64).astype(ml_dtypes.bfloat16))),
    "ds.T @ q over 6 heads (lhs loaded as lhs^T)": (
        lambda d, q: jnp.einsum("bkm,bkn->bmn", d, q), (_f32(6, 200, 256), _f32(6, 200, 64))),
    # Heads of many m-tiles: each head's m-tiles a loop nested in the loop over head pairs.
    "bf16 q @ k.T over 8 heads of 1280 rows (nested loops)": (
        lambda q, k: jnp.einsum("bmk,bnk->bmn", q, k),
        (_f32(8, 1280, 64).astype(ml_dtypes.bfloat16), _f32(8, 1280, 64).astype(ml_dtypes.bfloat16))),
    "bf16 q @ k.T over 6 heads, keys over two N panels (nested loops)": (
        lambda q, k: jnp.einsum("bmk,bnk->bmn", q, k),
        (_f32(6, 1280, 64).astype(ml_dtypes.bfloat16), _f32(6, 3584, 64).astype(ml_dtypes.bfloat16))),
    "ds.T @ q over 6 heads, q over two N panels (a loop over head pairs)": (
        lambda d, q: jnp.einsum("bkm,bkn->bmn", d, q),
        (_f32(6, 256, 64).astype(ml_dtypes.bfloat16), _f32(6, 256, 4096).astype(ml_dtypes.bfloat16))),
    "bf16 matmul over two N panels": (
        lambda x, w: x @ w, (_f32(1200, 2048).astype(ml_dtypes.bfloat16),
                             _f32(2048, 3584).astype(ml_dtypes.bfloat16))),
}


def _instructions(program: bytes) -> tuple[int, int]:
  """(stored instructions, of them in loops)."""
  insts = [inst for block in read_program(program).blocks for inst in block.instructions]
  return len(insts), sum(inst.loop is not None for inst in insts)


def _run(f, args, monkeypatch, unroll: bool):
  with monkeypatch.context() as m:
    if unroll:
      m.setenv("TRN_UNROLL_LOOPS", "1")
    else:
      m.delenv("TRN_UNROLL_LOOPS", raising=False)
    program = compile_code(artifact(f, *args))
  outputs, profile = native().run_program(program, [np.asarray(a) for a in args])
  return program, outputs, profile["device_time_ns"]


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow) if name == "layer norm"
                                  else name for name in CORPUS])
def test_a_loop_runs_what_its_unrolled_form_runs_in_the_same_cycles(name, monkeypatch):
  f, args = CORPUS[name]
  looped, out_loop, cycles_loop = _run(f, args, monkeypatch, unroll=False)
  unrolled, out_unrolled, cycles_unrolled = _run(f, args, monkeypatch, unroll=True)
  stored, in_loops = _instructions(looped)
  assert in_loops > 0 and _instructions(unrolled)[1] == 0
  assert stored < _instructions(unrolled)[0]
  for a, b in zip(out_loop, out_unrolled):
    assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
  assert cycles_loop == cycles_unrolled


@pytest.mark.parametrize("name", ["fused chain with a convert to bf16", "bf16 x @ w.T",
                                  "causal mask over heads of 3.5 periods (nested loops and runs)",
                                  "bf16 attn @ v over 7 heads (one left after the pairs)"])
def test_loop_waits_pass_the_back_end_verifier(name, monkeypatch):
  f, args = CORPUS[name]
  monkeypatch.setenv("TRN_VERIFY_IR", "1")  # checks every iteration's order, as it runs
  program, _, _ = _run(f, args, monkeypatch, unroll=False)
  assert _instructions(program)[1] > 0


def test_program_size_stops_growing_with_the_rows(monkeypatch):
  sizes = {}
  for rows in (6144, 24576, 98304):
    program = compile_code(artifact(lambda x, b: x + b, _f32(rows, 16), _f32(16)))
    sizes[rows] = _instructions(program)[0]
  assert sizes[6144] == sizes[24576] == sizes[98304]


def test_a_matmuls_program_size_stops_growing_with_m():
  sizes = {}
  for rows in (2048, 8192, 32768):
    x = jax.ShapeDtypeStruct((rows, 256), jnp.bfloat16)
    w = jax.ShapeDtypeStruct((256, 512), jnp.bfloat16)
    sizes[rows] = _instructions(compile_code(artifact(lambda x, w: x @ w, x, w)))
  assert sizes[2048] == sizes[8192] == sizes[32768], sizes
  assert sizes[2048][1] > 0


def test_a_batched_matmuls_program_size_stops_growing_with_the_batch():
  sizes = {}
  for heads in (8, 32, 128):
    q = jax.ShapeDtypeStruct((heads, 256, 64), jnp.bfloat16)
    k = jax.ShapeDtypeStruct((heads, 256, 64), jnp.bfloat16)
    sizes[heads] = _instructions(compile_code(artifact(
        lambda q, k: jnp.einsum("bmk,bnk->bmn", q, k), q, k)))
  assert sizes[8] == sizes[32] == sizes[128], sizes
  assert sizes[8][1] > 0


def test_masked_scores_size_stops_growing_with_the_heads_and_the_sequence():
  sizes = {}
  for heads, t in ((12, 2048), (24, 2048), (12, 4096)):
    s = jax.ShapeDtypeStruct((heads, t, t), jnp.float32)
    masked = lambda s: jnp.where(jnp.tril(jnp.ones((t, t), bool)), s, np.float32(-1e9)) * 0.125
    sizes[heads, t] = _instructions(compile_code(artifact(masked, s)))[0]
  assert sizes[12, 2048] == sizes[24, 2048] == sizes[12, 4096], sizes


def test_attention_matmuls_size_stops_growing_with_the_query_rows_of_each_head():
  sizes, nested = {}, {}
  k = jax.ShapeDtypeStruct((8, 1024, 64), jnp.bfloat16)
  for rows in (1280, 4096, 16384):
    q = jax.ShapeDtypeStruct((8, rows, 64), jnp.bfloat16)
    program = compile_code(artifact(lambda q, k: jnp.einsum("bmk,bnk->bmn", q, k), q, k))
    sizes[rows] = _instructions(program)
    nested[rows] = sum(len(inst.loops()) == 2
                       for block in read_program(program).blocks for inst in block.instructions)
  assert sizes[1280] == sizes[4096] == sizes[16384], sizes
  assert nested[1280] > 0, nested


# --- hand-written loops: the format and the loader -----------------------------------------

def _copy_loop(count=6, rows=4, cols=32):
  """HBM x [count·rows, cols] -> SBUF -> HBM out, `rows` rows per iteration, in a loop."""
  b = ProgramBuilder()
  x = b.tensor("parameter", DType.F32, (count * rows, cols), index=0, name="x")
  out = b.tensor("output", DType.F32, (count * rows, cols), index=0, name="out")
  tile = TileAP.dense(Memory.SBUF, DType.F32, 0, rows, 0, (cols,))
  step = rows * cols
  with b.loop(count):
    b.dma_copy(0, tile, HbmAP.dense(x, (rows, cols)), steps={"src": step})
    b.dma_copy(1, HbmAP.dense(out, (rows, cols)), tile, steps={"dst": step})
  return b


def test_a_hand_written_loop_copies_every_iteration_and_reads_back():
  b = _copy_loop()
  program = finish(b)
  x = _f32(24, 32)
  (out,), _ = native().run_program(program, [x])
  np.testing.assert_array_equal(out, x)
  read = read_program(program)
  assert serialize(read.target, read.tensors, read.blocks, read.debug, read.source) == program
  assert "loop x5" in _disassembly(program) and "+128i[" in _disassembly(program)


def _disassembly(program: bytes) -> str:
  from hlo_lowering.program import disassemble
  return disassemble(program)


def _tampered(change) -> bytes:
  """The copy loop through the back end, with `change(loop instructions)` applied."""
  b = _copy_loop()
  finish(b)
  body = [inst for inst in b.instructions if inst.loop is not None]
  change(body)
  return serialize(b.target, b.tensors, b.blocks, b.debug_entries, b.source)


def _rejected(program: bytes, match: str) -> None:
  with pytest.raises(Exception, match=match):
    native().program_info(program)


def test_the_loader_rejects_a_loop_that_never_runs():
  def zero(body):
    body[0].loop.count = 0
  _rejected(_tampered(zero), "a loop runs at least one instruction at least once")


def test_the_loader_rejects_a_loop_that_leaves_its_tensor_at_the_last_iteration():
  def too_far(body):
    body[0].steps["src"] += 1
  _rejected(_tampered(too_far), r"at iteration 4 HBM operand 0 \(offset step 129\) covers "
                                r"elements \[644, 771\] of tensor 0 \(x\) which has 768")


def test_the_loader_rejects_a_wait_that_can_never_be_met():
  def greedy(body):
    store = next(inst for inst in body if inst.waits)
    stream = store.waits[0][0]
    store.wait_steps[stream] = store.wait_steps.get(stream, 0) + 1
  _rejected(_tampered(greedy), "the wait can never be met")


def test_the_loader_rejects_a_loop_past_its_stream():
  program = _tampered(lambda body: None)
  # Each queue holds the peeled copy, then the body: a loop record (first 1, length 1, count 5).
  record = (1).to_bytes(4, "little") * 2 + (5).to_bytes(4, "little")
  at = program.rfind(record)
  assert at > 0
  longer = program[:at + 4] + (2).to_bytes(4, "little") + program[at + 8:]
  _rejected(longer, r"covers instructions 1..2 but the stream has 2")


def test_a_profile_names_each_iteration_and_its_waits():
  program = finish(_copy_loop())
  _, profile = native().run_program(program, [_f32(24, 32)], record_timeline=True)
  stores = [r for r in profile["timeline"] if r["stream"] == "DMA1"]
  # The peeled copy (no loop), then iterations 0..4: each waits for its own load on DMA0.
  assert [r.get("iteration") for r in stores] == [None, 0, 1, 2, 3, 4]
  assert [r["waits"] for r in stores] == [[("DMA0", n)] for n in range(1, 7)]


def test_the_critical_path_follows_each_iterations_waits():
  from jax_trn import profile
  program = finish(_copy_loop())
  _, raw = native().run_program(program, [_f32(24, 32)], record_timeline=True)
  p = profile.profile_from_raw(raw)
  assert abs(sum(s.contribution_ns for s in p.critical_path()) - p.device_time_ns) < 1e-6
  done = p._done_times(p._by_stream())
  stores = [r for r in p.timeline if r["stream"] == "DMA1"]
  loads = [r for r in p.timeline if r["stream"] == "DMA0"]
  # The k-th store is released by the k-th load (a loop runs one stored instruction 5 times).
  assert [p._binding_wait(r, done) for r in stores] == loads


def test_queues_after_a_loop_are_the_unrolled_programs():
  def program(looped: bool):
    b = ProgramBuilder()
    x = b.tensor("parameter", DType.F32, (40, 32), index=0, name="x")
    tile = TileAP.dense(Memory.SBUF, DType.F32, 0, 4, 0, (32,))
    if looped:
      with b.loop(10):
        b.dma_copy(None, tile, HbmAP.dense(x, (4, 32)), steps={"src": 128})
    else:
      for i in range(10):
        b.dma_copy(None, tile, HbmAP.dense(x, (4, 32), offset=128 * i))
    b.dma_copy(None, tile, HbmAP.dense(x, (4, 32)))
    return finish(b), b

  (looped, b_loop), (unrolled, b_unrolled) = program(True), program(False)
  assert b_loop.instructions[-1].stream == b_unrolled.instructions[-1].stream
  # peel-loops ran the first iteration before the loop: one plain copy, then 9 iterations.
  assert [i.loop is None for i in b_loop.instructions] == [True, False, True]
  assert b_loop.instructions[1].loop.count == 9
  assert _instructions(looped) == (3, 1) and _instructions(unrolled) == (11, 0)


# --- nested loops: a loop body holding a loop ------------------------------------------------

def _scaled_tiles(nested: bool, batches=5, pairs=4, rows=4, cols=32, add=1.0, groups=1):
  """out[b] = x[b] · 2 + add over `batches` batches of 2·pairs row tiles, double-buffered:
  tile p of a pair loads into SBUF buffer p (queue 0), VectorE scales it into result p and
  queue 1 stores it. Nested: a loop over batches holding a loop over pairs; else every tile
  unrolled. Buffers are reused across pairs and batches, so a wrong wait in either loop
  (a load overwriting a buffer its previous store still reads) changes the output. groups > 1:
  `groups` groups of batches, a third loop around the two (x is [groups · batches, ...])."""
  b = ProgramBuilder()
  shape = (groups * batches, 2 * pairs * rows, cols)
  x = b.tensor("parameter", DType.F32, shape, index=0, name="x")
  out = b.tensor("output", DType.F32, shape, index=0, name="out")
  size = rows * cols * 4
  loads = [TileAP.dense(Memory.SBUF, DType.F32, 0, rows, p * size, (cols,)) for p in range(2)]
  results = [TileAP.dense(Memory.SBUF, DType.F32, 0, rows, (2 + p) * size, (cols,))
             for p in range(2)]
  tile, batch = rows * cols, 2 * pairs * rows * cols

  moves = ([batches * batch] if groups > 1 else []) + [batch, 2 * tile]

  def pair(offset, steps=None):
    for p in range(2):
      at = offset + p * tile
      b.dma_copy(0, loads[p], HbmAP.dense(x, (rows, cols), offset=at),
                 steps=steps and [{"src": m} for m in moves])
      b.tensor_scalar(Alu.MUL, results[p], loads[p], Scalar(DType.F32, 2.0))
      b.tensor_scalar(Alu.ADD, results[p], results[p], Scalar(DType.F32, add))
      b.dma_copy(1, HbmAP.dense(out, (rows, cols), offset=at), results[p],
                 steps=steps and [{"dst": m} for m in moves])

  if nested:
    with contextlib.ExitStack() as loops:
      for count in ([groups] if groups > 1 else []) + [batches, pairs]:
        loops.enter_context(b.loop(count))
      pair(0, steps=True)
  else:
    for i in range(groups * batches):
      for j in range(pairs):
        pair(i * batch + j * 2 * tile)
  return b


def test_nested_loops_compute_what_the_unrolled_program_does_in_the_same_cycles():
  x = _f32(5, 32, 32)
  nested, unrolled = finish(_scaled_tiles(True)), finish(_scaled_tiles(False))
  (out_nested,), prof_nested = native().run_program(nested, [x])
  (out_unrolled,), prof_unrolled = native().run_program(unrolled, [x])
  np.testing.assert_array_equal(out_nested, x * np.float32(2) + np.float32(1))
  assert out_nested.tobytes() == out_unrolled.tobytes()
  assert prof_nested["device_time_ns"] == prof_unrolled["device_time_ns"]
  assert _instructions(nested)[0] < _instructions(unrolled)[0] / 4


def test_three_nested_loops_compute_what_the_unrolled_program_does_in_the_same_cycles():
  x = _f32(12, 24, 32)
  shape = dict(groups=3, batches=4, pairs=3)
  nested, unrolled = finish(_scaled_tiles(True, **shape)), finish(_scaled_tiles(False, **shape))
  (out_nested,), prof_nested = native().run_program(nested, [x])
  (out_unrolled,), prof_unrolled = native().run_program(unrolled, [x])
  np.testing.assert_array_equal(out_nested, x * np.float32(2) + np.float32(1))
  assert out_nested.tobytes() == out_unrolled.tobytes()
  assert prof_nested["device_time_ns"] == prof_unrolled["device_time_ns"]
  assert "k = 0..1" in _disassembly(nested)


@pytest.mark.parametrize("batches,pairs", [(2, 2), (3, 5), (7, 3)])
def test_nested_loop_waits_order_every_iteration(batches, pairs, monkeypatch):
  monkeypatch.setenv("TRN_VERIFY_IR", "1")  # the back end's verifier checks each iteration
  from compiler_harness import through_backend
  builder = through_backend(_scaled_tiles(True, batches=batches, pairs=pairs))
  x = _f32(batches, 8 * pairs, 32)
  (out,), _ = native().run_program(builder.serialize(), [x])
  np.testing.assert_array_equal(out, x * np.float32(2) + np.float32(1))


def test_a_nested_loop_reads_back_and_disassembles_with_both_counters():
  program = finish(_scaled_tiles(True))
  read = read_program(program)
  assert serialize(read.target, read.tensors, read.blocks, read.debug, read.source) == program
  text = _disassembly(program)
  assert "loop x4 (" in text and "j = 0..2" in text, text
  assert "+1024i+256j[" in text, text


def _tampered_nested(change) -> bytes:
  b = _scaled_tiles(True)
  finish(b)
  change([inst for inst in b.instructions if len(inst.loops()) == 2])
  return serialize(b.target, b.tensors, b.blocks, b.debug_entries, b.source)


def test_the_loader_checks_a_nested_step_at_the_corner_of_last_iterations():
  def too_far(inner):
    load = next(inst for inst in inner if "src" in inst.steps)
    load.steps["src"] += 128  # in bounds in the first batches, past x's end in the last one
  _rejected(_tampered_nested(too_far), r"in a loop of 4 x 3 iterations: at iterations \(3, 2\) "
                                       r"HBM operand 0 \(offset steps 1024, 384\) covers "
                                       r"elements \[5120, 5247\] of tensor 0 \(x\) which has 5120")


def test_the_loader_rejects_a_nested_wait_that_can_never_be_met():
  def greedy(inner):
    store = next(inst for inst in inner if inst.waits and inst.stream != 0)
    steps = store.steps_of(store.loops()[0])[1]
    steps[store.waits[0][0]] = steps.get(store.waits[0][0], 0) + 1000
  _rejected(_tampered_nested(greedy), r"at iterations \(3, \d\) it waits for .* the wait can "
                                      r"never be met")


def test_the_loader_rejects_loops_that_overlap_without_nesting():
  b = _scaled_tiles(True)
  finish(b)
  program = serialize(b.target, b.tensors, b.blocks, b.debug_entries, b.source)
  # The loads' queue: its inner loop record moved one instruction on, past the outer loop's end.
  (outer_first, outer_length, _), (first, length, loop) = [
      run for run in loop_runs(b.blocks[0].streams[Stream.dma(0)])][-2:]
  assert outer_first + outer_length == first + length
  record = b"".join(v.to_bytes(4, "little") for v in (first, length, loop.count))
  at = program.rfind(record)
  assert at > 0
  moved = program[:at] + (first + 1).to_bytes(4, "little") + program[at + 4:]
  _rejected(moved, r"loops are sorted and either disjoint or nested \(it starts inside loop "
                   r"\d, which ends before \d+\)")


def test_the_builder_and_the_loader_limit_the_nesting_depth():
  b = ProgramBuilder()
  with contextlib.ExitStack() as stack:
    for _ in range(8):
      stack.enter_context(b.loop(2))
    with pytest.raises(ValueError, match="loops nest at most 8 deep"):
      stack.enter_context(b.loop(2))


def test_a_profile_numbers_nested_iterations_and_gives_their_waits():
  program = finish(_scaled_tiles(True, batches=3, pairs=3))
  _, profile = native().run_program(program, [_f32(3, 24, 32)], record_timeline=True)
  stores = [r for r in profile["timeline"] if r["stream"] == "DMA1"]
  assert len(stores) == 3 * 3 * 2
  loops = [r for r in stores if "iteration" in r]
  # The innermost stored store runs once per (batch, pair) of the loops, numbered in order.
  by_index = {}
  for r in loops:
    by_index.setdefault(r["index"], []).append(r["iteration"])
  assert all(runs == list(range(len(runs))) for runs in by_index.values()), by_index
  # Every store waits for VectorE's result of the same tile: counts grow 2 a tile.
  counts = [dict(r["waits"]).get("DVE") for r in stores]
  assert counts == list(range(2, 2 * len(stores) + 1, 2)), counts


@pytest.mark.parametrize("queue", [0, 1])
def test_the_nested_double_buffer_program_fails_without_its_inner_wait_steps(queue):
  """The check above can fail: the same program with the inner loop's wait steps of the loads
  (queue 0) or the stores (queue 1) dropped races on the buffers and computes wrong values."""
  from compiler_harness import through_backend
  b = through_backend(_scaled_tiles(True))
  dropped = 0
  for inst in b.instructions:
    if len(inst.loops()) == 2 and inst.stream == Stream.dma(queue):
      for loop in inst.loops():
        dropped += len(inst.steps_of(loop)[1])
        inst.steps_of(loop)[1].clear()
  assert dropped
  x = _f32(5, 32, 32)
  (out,), _ = native().run_program(serialize(b.target, b.tensors, b.blocks, b.debug_entries,
                                             b.source), [x])
  assert not np.array_equal(out, x * np.float32(2) + np.float32(1))


def test_a_loop_nest_split_between_two_cores_runs_what_its_unrolled_form_runs(monkeypatch):
  """An LNC=2 device cuts the tiles mid-grid: each core's share is planned as partial outer
  indices at either end and whole ones between (tile_loops.loop_plan)."""
  f, args = CORPUS["causal mask over heads of 3.5 periods (nested loops and runs)"]
  text = jax.jit(f).lower(*args).as_text()
  runs = {}
  for unroll in ("0", "1"):
    monkeypatch.setenv("TRN_UNROLL_LOOPS", unroll)
    program = compilation.compile_text(text, "trn2", lnc=2)
    outputs, profile = native().run_program(program, [np.asarray(a) for a in args])
    runs[unroll] = (program, outputs[0].tobytes(), profile["device_time_ns"])
  assert read_program(runs["0"][0]).cores == 2
  assert _instructions(runs["0"][0])[1] > 0
  assert runs["0"][1:] == runs["1"][1:]
