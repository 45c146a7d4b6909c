"""Program blocks and SP's control instructions (jump / branch / switch) on hand-built programs:
semantics, loader validation of malformed exits, the iteration cap, and the timing charged per
block boundary."""

import struct

import numpy as np
import pytest

from hlo_lowering.program import (Alu, ControlOp, DType, HbmAP, ProgramBuilder, Scalar,
                                  disassemble, read_program)
from hlo_lowering.program import writer
from compiler_harness import finish

_native = pytest.importorskip("jax_trn._native")


def _scalar(tensor):
  return HbmAP.dense(tensor, (1,))


def _counting_loop():
  """out = 0; do out += 1 while out < limit: a loop of `limit` iterations over constants."""
  b = ProgramBuilder()
  limit = b.tensor("parameter", DType.S32, (1,), index=0, name="limit")
  out = b.tensor("output", DType.S32, (1,), index=0, name="out")
  pred = b.tensor("temporary", DType.PRED, (1,), name="pred")
  one = b.constant(DType.S32, (1,), np.int32([1]).tobytes(), name="one")
  d = b.debug("stablehlo.while", "jit(f)/while", "f.py:7:1")
  b.gp_fill(_scalar(out), Scalar(DType.S32, 0), debug=d)
  body, end = b.new_block(), b.new_block()
  b.jump(body, debug=d)
  b.set_block(body)
  b.gp_elementwise(Alu.ADD, _scalar(out), [_scalar(out), _scalar(one)], debug=d)
  b.gp_elementwise(Alu.LT, _scalar(pred), [_scalar(out), _scalar(limit)], debug=d)
  b.branch(_scalar(pred), body, end, debug=d)
  return b


def _run(b, *inputs, **kwargs):
  return _native.run_program(finish(b), [np.asarray(x) for x in inputs], **kwargs)


def test_loop_runs_until_its_predicate_is_false():
  for limit in (1, 5, 1000):
    (out,), profile = _run(_counting_loop(), np.int32([limit]))
    assert out.tolist() == [limit]


def test_round_trip_and_disassembly_of_blocks():
  data = finish(_counting_loop())
  assert struct.unpack_from("<I", data, 8)[0] == writer.VERSION
  program = read_program(data)
  assert [blk.exit.op for blk in program.blocks] == [ControlOp.JUMP, ControlOp.BRANCH,
                                                     ControlOp.END]
  assert program.blocks[1].exit.targets == [1, 2]
  text = disassemble(data)
  assert "block 1:" in text and "exit branch t2(pred)+0[1x1] -> block 1, block 2" in text
  assert _native.program_info(data)


def test_switch_picks_its_target_and_out_of_range_takes_the_last():
  def program(dtype):
    b = ProgramBuilder()
    index = b.tensor("parameter", dtype, (1,), index=0, name="index")
    out = b.tensor("output", DType.S32, (1,), index=0, name="out")
    targets = [b.new_block() for _ in range(3)]
    b.switch(_scalar(index), targets)
    for value, block in enumerate(targets):
      b.set_block(block)
      b.gp_fill(_scalar(out), Scalar(DType.S32, 10 + value))
    return b
  for index, expected in ((0, 10), (1, 11), (2, 12), (3, 12), (-1, 12), (2**31 - 1, 12)):
    (out,), _ = _run(program(DType.S32), np.int32([index]))
    assert out.tolist() == [expected], index
  (out,), _ = _run(program(DType.U64), np.uint64([2**64 - 1]))
  assert out.tolist() == [12]


def test_iteration_cap_is_a_clear_error(monkeypatch):
  monkeypatch.setenv("TRN_MAX_LOOP_ITERATIONS", "100")
  (out,), _ = _run(_counting_loop(), np.int32([99]))  # 100 entries of the body: allowed
  assert out.tolist() == [99]
  with pytest.raises(Exception, match=r"block 1 was entered more than 100 times.*iteration cap"
                                      r".*stablehlo.while \"jit\(f\)/while\" at f.py:7:1"):
    _run(_counting_loop(), np.int32([1000]))


def test_an_endless_loop_stops_at_the_default_cap_quickly():
  b = ProgramBuilder()
  b.tensor("parameter", DType.S32, (1,), index=0)
  loop = b.new_block()
  b.jump(loop)
  b.set_block(loop)
  b.jump(loop)
  with pytest.raises(Exception, match="entered more than 10000000 times"):
    _run(b, np.int32([0]))


def test_timing_charges_each_block_boundary():
  def device_time(limit):
    _, profile = _run(_counting_loop(), np.int32([limit]), record_timeline=True)
    return profile
  p1, p11 = device_time(1), device_time(11)
  per_iteration = (p11["device_time_ns"] - p1["device_time_ns"]) / 10
  # Two dependent GpSimd ops back to back, the last one's semaphore reaching SP, then the
  # barrier and the predicate read (100 + 500 ns, est.).
  pool = [r for r in p1["timeline"] if r["stream"] == "POOL"]  # fill, add, lt
  body = sum(r["busy_end_ns"] - r["start_ns"] for r in pool[1:])
  handoff = _native.target_spec("trn2")["semaphore_handoff_ns"]
  assert per_iteration == pytest.approx(body + handoff + 600, rel=1e-6)
  # SP runs one control instruction per block exit: jump + one branch per iteration.
  assert p11["streams"]["SP"]["instructions"] == 1 + 11
  branches = [r for r in p11["timeline"] if r["opcode"] == "branch"]
  assert len(branches) == 11 and all(r["stream"] == "SP" for r in branches)
  assert branches[0]["end_ns"] - branches[0]["start_ns"] == pytest.approx(600)


def _exit_offset(data):
  """Byte offset of block 0's exit in a program whose block 0 has no instructions."""
  program = read_program(data)
  assert not program.blocks[0].streams
  offset = 12
  offset += 4 + len(program.target) + 1  # and the core count (version 6)
  offset += 4
  for t in program.tensors:
    offset += 4 + len(t.name.encode()) + 1 + 4 + 1 + 4 + 8 * len(t.shape) + 8 + len(t.data)
  offset += 4  # block count
  offset += 4  # block 0: stream count (0)
  return offset


def _switch_program():
  b = ProgramBuilder()
  index = b.tensor("parameter", DType.S32, (1,), index=0, name="index")
  b.tensor("parameter", DType.F32, (2,), index=1, name="x")
  out = b.tensor("output", DType.S32, (1,), index=0, name="out")
  targets = [b.new_block(), b.new_block()]
  b.switch(_scalar(index), targets)
  for block in targets:
    b.set_block(block)
    b.gp_fill(_scalar(out), Scalar(DType.S32, 1))
  return finish(b)


def _expect_invalid(data, match):
  with pytest.raises(Exception, match=match):
    _native.program_info(data)


def test_loader_rejects_malformed_exits():
  data = _switch_program()
  at = _exit_offset(data)
  assert struct.unpack_from("<H", data, at)[0] == ControlOp.SWITCH
  patch = lambda offset, fmt, *values: (data[:offset] + struct.pack("<" + fmt, *values)
                                        + data[offset + struct.calcsize("<" + fmt):])
  _expect_invalid(patch(at, "H", 7), "unknown exit opcode 7")
  _expect_invalid(patch(at + 2, "I", 99), "exit .* has debug id 99")
  selector = at + 6  # tensor u32, offset i64, dims list
  _expect_invalid(patch(selector, "I", 1), "switch index must be an integer, got f32")
  _expect_invalid(patch(selector, "I", 9), "names tensor 9")
  _expect_invalid(patch(selector + 4 + 8 + 4, "qq", 0, 2), "addresses 2 elements")
  targets = selector + 4 + 8 + 4 + 16
  _expect_invalid(patch(targets, "I", 0), "switch has no targets")
  _expect_invalid(patch(targets + 4, "I", 17), "targets block 17 but the program has 3 blocks")
  _expect_invalid(data[:at + 3], "block count 3 needs at least 30 bytes")
  _expect_invalid(patch(8, "I", writer.VERSION + 1), f"version {writer.VERSION + 1}")


def test_loader_rejects_an_empty_block_list_and_control_opcodes_in_streams():
  b = ProgramBuilder()
  data = finish(b)
  empty = data[:12] + struct.pack("<I", 4) + b"trn2\x01" + struct.pack("<III", 0, 0, 0) + \
      struct.pack("<I", 0)
  _expect_invalid(empty, "at least one block")
  # One stream (DVE) holding an instruction whose opcode is a control opcode.
  body = struct.pack("<IBI", 1, 3, 1) + struct.pack("<HII", int(ControlOp.JUMP), 0, 0)
  bad = data[:12] + struct.pack("<I", 4) + b"trn2\x01" + struct.pack("<I", 0) + \
      struct.pack("<I", 1) + body
  _expect_invalid(bad, "control instructions are block exits")


def _str(text: str) -> bytes:
  return struct.pack("<I", len(text.encode())) + text.encode()


def test_versions_1_to_3_still_load():
  b = ProgramBuilder(source="module @m {}")
  x = b.tensor("parameter", DType.S32, (1,), index=0)
  y = b.tensor("output", DType.S32, (1,), index=0)
  b.gp_copy(_scalar(y), _scalar(x), debug=b.debug("stablehlo.copy", "jit(f)/copy", "f.py:1:2",
                                                  "gpsimd", "gpsimd.copy"))
  v6 = finish(b)
  program = read_program(v6)
  # Version 5 and before: no core count after the target name.
  cores_at = 12 + 4 + len(program.target)
  v4 = v6[:cores_at] + v6[cores_at + 1:]
  # Version 3: no loop list after a stream's instructions (here: one stream, before the exit).
  exit_at = len(v4) - (4 + sum(20 + len(e.op) + len(e.name) + len(e.location) + len(e.lowering)
                               + len(e.rule) for e in program.debug) + 4 + len(program.source)) - 6
  assert v4[exit_at - 4:exit_at] == struct.pack("<I", 0)
  v3 = v4[:8] + struct.pack("<I", 3) + v4[12:exit_at - 4] + v4[exit_at:]
  head = 12 + 4 + 4
  tensors_end = head + 4 + sum(4 + len(t.name.encode()) + 1 + 4 + 1 + 4 + 8 * len(t.shape) + 8
                               for t in program.tensors)
  exit_size = 6
  tail_start = len(v3) - (4 + sum(20 + len(e.op) + len(e.name) + len(e.location) + len(e.lowering)
                                  + len(e.rule) for e in program.debug) + 4 + len(program.source))
  # Versions 1 and 2: debug entries without lowering and rule.
  old_tail = struct.pack("<I", len(program.debug)) + b"".join(
      _str(e.op) + _str(e.name) + _str(e.location) for e in program.debug) + _str(program.source)
  v2 = v3[:8] + struct.pack("<I", 2) + v3[12:tail_start] + old_tail
  # Version 1: also without the block count and the exit.
  v1 = (v3[:8] + struct.pack("<I", 1) + v3[12:tensors_end]
        + v3[tensors_end + 4:tail_start - exit_size] + old_tail)
  assert read_program(v3).streams == program.streams
  assert _native.run_program(v3, [np.int32([42])])[0][0].tolist() == [42]
  for old in (v1, v2):
    read = read_program(old)
    assert read.streams == program.streams and read.source == program.source
    assert [(e.op, e.location, e.lowering) for e in read.debug] == \
        [(e.op, e.location, "") for e in program.debug]
    (out,), profile = _native.run_program(old, [np.int32([42])])
    assert out.tolist() == [42] and profile["debug"][-1]["lowering"] == ""
