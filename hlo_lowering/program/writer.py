"""Serializes a program to the byte format of docs/program-format.md (little-endian)."""

import struct

from .enums import ControlOp, EndpointKind, Memory, ScalarKind, TensorKind, core_of
from .instructions import (OPERAND_LAYOUT, TILE_FIELDS, TileStep, hbm_operand_keys,
                           stepped_values, tile_operand_keys)
from .operands import HbmAP, Scalar, TileAP

MAGIC = b"TRNPROG\0"
VERSION = 7


class _Writer:
  def __init__(self):
    self.out = bytearray()

  def pack(self, fmt, *values):
    self.out += struct.pack("<" + fmt, *values)

  def str(self, text: str):
    data = text.encode("utf-8")
    self.pack("I", len(data))
    self.out += data

  def blob(self, data: bytes):
    self.pack("Q", len(data))
    self.out += data

  def tile(self, ap: TileAP):
    if ap.memory not in (Memory.SBUF, Memory.PSUM):
      raise ValueError(f"TileAP memory {ap.memory!r} is neither SBUF nor PSUM")
    if ap.buffer is not None:
      raise ValueError(f"TileAP in unplaced buffer {ap.buffer} (run the back end's plan-memory)")
    self.pack("BBHHI", ap.memory, ap.dtype, ap.partition_start, ap.partition_count,
              ap.byte_offset)
    self.pack("I", len(ap.free))
    for stride, count in ap.free:
      self.pack("iI", stride, count)

  def hbm(self, ap: HbmAP):
    self.pack("Iq", ap.tensor, ap.offset)
    self.pack("I", len(ap.dims))
    for stride, count in ap.dims:
      self.pack("qq", stride, count)

  def scalar(self, value: Scalar):
    self.pack("B", value.dtype)
    if value.dtype.is_float:
      self.pack("d", value.value)
    elif value.value >= 2**63:
      self.pack("Q", value.value)
    else:
      self.pack("q", value.value)

  def operand(self, kind: str, value):
    if kind == "u8":
      self.pack("B", int(value))
    elif kind == "u32":
      self.pack("I", int(value))
    elif kind == "u64":
      self.pack("Q", int(value))
    elif kind == "f32":
      self.pack("f", float(value))
    elif kind == "i64":
      self.pack("q", int(value))
    elif kind == "i64_list":
      self.pack("I", len(value))
      for v in value:
        self.pack("q", int(v))
    elif kind == "tile":
      self.tile(value)
    elif kind == "hbm":
      self.hbm(value)
    elif kind == "hbm_list":
      self.pack("I", len(value))
      for ap in value:
        self.hbm(ap)
    elif kind == "endpoint":
      if isinstance(value, HbmAP):
        self.pack("B", EndpointKind.HBM)
        self.hbm(value)
      else:
        self.pack("B", EndpointKind.TILE)
        self.tile(value)
    elif kind == "scalar":
      self.scalar(value)
    elif kind == "scalar_operand":
      if isinstance(value, Scalar):
        self.pack("B", ScalarKind.IMMEDIATE)
        self.scalar(value)
      else:
        self.pack("B", ScalarKind.TILE)
        self.tile(value)
    elif kind == "row_sum":
      self.pack("B", int(value))
    elif kind == "summed_tile":  # present exactly when the row_sum operand before it says so
      if value is not None:
        self.tile(value)
    else:
      raise ValueError(f"unknown operand kind {kind!r}")


# Step kinds: a wait count, an HBM offset, an iota's base (its "base" operand), a tile operand's
# field (version 7: followed by the field code, the period and the phase).
STEP_WAIT, STEP_HBM, STEP_BASE, STEP_TILE = 0, 1, 2, 3


def loop_runs(insts: list) -> list:
  """(first, length, Loop) of each loop of one stream's instructions (nested loops too), sorted
  by first instruction, an enclosing loop before the loops it holds; a loop's instructions of
  the stream must be consecutive."""
  spans = {}  # Loop -> [first, last]
  for k, inst in enumerate(insts):
    for loop in inst.loops():
      span = spans.setdefault(loop, [k, k])
      if span[1] < k - 1:
        raise ValueError(f"a loop's instructions of one stream are not consecutive (at {k})")
      span[1] = k
  depth = {loop: len(loop.chain()) for loop in spans}
  return sorted(((first, last - first + 1, loop) for loop, (first, last) in spans.items()),
                key=lambda run: (run[0], depth[run[2]]))


def _loop_steps(inst, loop) -> list:
  """(kind, index, step, tail) of an instruction's nonzero steps per iteration of `loop` (tail:
  a tile step's (field code, period, phase), else None)."""
  steps_of, wait_steps = inst.steps_of(loop)
  steps = [(STEP_WAIT, k, wait_steps.get(s, 0), None) for k, (s, _) in enumerate(inst.waits)]
  keys, tiles = hbm_operand_keys(inst), tile_operand_keys(inst)
  for key, step in steps_of.items():
    if isinstance(step, TileStep) and key[0] in tiles:
      steps.append((STEP_TILE, tiles.index(key[0]), step.step,
                    (TILE_FIELDS.index(key[1]), step.period, step.phase)))
    elif key in stepped_values(inst):
      steps.append((STEP_BASE, 0, step, None))
    elif key in keys:
      steps.append((STEP_HBM, keys.index(key), step, None))
    else:
      raise ValueError(f"{inst.opcode.name.lower()}: a step for {key!r}, which is not one of its "
                       f"HBM operands {keys} or tile operands {tiles}")
  return [step for step in steps if step[2] != 0]


def _streams(w: _Writer, streams: dict) -> None:
  used = sorted(s for s, insts in streams.items() if insts)
  w.pack("I", len(used))
  for stream in used:
    w.pack("B", stream)
    w.pack("I", len(streams[stream]))
    for inst in streams[stream]:
      w.pack("HI", inst.opcode, inst.debug_id)
      w.pack("I", len(inst.waits))
      for wait_stream, count in inst.waits:
        w.pack("BI", wait_stream, count)
      for name, kind in OPERAND_LAYOUT[inst.opcode]:
        w.operand(kind, inst.operands[name])
    runs = loop_runs(streams[stream])
    w.pack("I", len(runs))
    for first, length, loop in runs:
      steps = [(k, *step) for k in range(length)
               for step in _loop_steps(streams[stream][first + k], loop)]
      w.pack("IIII", first, length, loop.count, len(steps))
      for *step, tail in steps:
        w.pack("IBBq", *step)
        if tail is not None:
          w.pack("BII", *tail)


def _exit(w: _Writer, exit_) -> None:
  w.pack("HI", exit_.op, exit_.debug_id)
  if exit_.op == ControlOp.JUMP:
    w.pack("I", exit_.targets[0])
  elif exit_.op == ControlOp.BRANCH:
    w.hbm(exit_.selector)
    w.pack("II", *exit_.targets)
  elif exit_.op == ControlOp.SWITCH:
    w.hbm(exit_.selector)
    w.pack("I", len(exit_.targets))
    for target in exit_.targets:
      w.pack("I", target)


def serialize(target: str, tensors, blocks, debug, source: str) -> bytes:
  """`blocks`: [Block] (each: stream id -> list of Instruction, and its Exit); empty streams
  are left out."""
  w = _Writer()
  w.out += MAGIC
  w.pack("I", VERSION)
  w.str(target)
  # The physical cores the streams use (version 6): core 1's streams make an LNC=2 program.
  w.pack("B", 1 + max((core_of(s) for block in blocks for s, insts in block.streams.items()
                       if insts), default=0))
  w.pack("I", len(tensors))
  for t in tensors:
    w.str(t.name)
    dtype, shape = t.table_dtype_shape
    w.pack("BI", t.kind, t.index)
    if t.kind == TensorKind.DONATED_PARAMETER:
      w.pack("I", t.output)
    w.pack("B", dtype)
    w.pack("I", len(shape))
    for d in shape:
      w.pack("q", d)
    w.blob(t.data)
  w.pack("I", len(blocks))
  for block in blocks:
    _streams(w, block.streams)
    _exit(w, block.exit)
  _debug_and_source(w, debug, source)
  return bytes(w.out)


def _debug_and_source(w: _Writer, debug, source: str) -> None:
  """The program's tail: the debug table, then the source text."""
  w.pack("I", len(debug))
  for entry in debug:
    w.str(entry.op)
    w.str(entry.name)
    w.str(entry.location)
    w.str(entry.lowering)
    w.str(entry.rule)
  w.str(source)


def replace_debug_info(program: bytes, debug_offset: int, debug, source: str) -> bytes:
  """`program` with another debug table and source text (which end every program of version 3
  or 4; the loader's program_info gives `debug_offset`, where the table starts); the
  instructions are untouched."""
  w = _Writer()
  w.out += program[:debug_offset]
  _debug_and_source(w, debug, source)
  return bytes(w.out)
