"""Parses program bytes back into Python objects and disassembles them as text (golden snapshots,
tests, debugging compiler output). The C++ loader is the validating reader; this one checks only
what it needs to parse."""

import dataclasses
import struct

from .enums import (MATMUL_START, MATMUL_STOP, Alu, ControlOp, DType, EndpointKind, Memory, Opcode,
                    ScalarKind, TensorKind, stream_name)
from .instructions import Block, DebugEntry, Exit, Instruction, OPERAND_LAYOUT, Tensor
from .operands import HbmAP, Scalar, TileAP
from .writer import MAGIC, VERSION


@dataclasses.dataclass
class Program:
  target: str
  tensors: list
  blocks: list  # [Block]; execution starts at blocks[0]
  debug: list
  source: str

  @property
  def streams(self) -> dict:
    """blocks[0]'s streams (all of a program without control flow)."""
    return self.blocks[0].streams


class _Reader:
  def __init__(self, data: bytes):
    self.data = data
    self.pos = 0

  def unpack(self, fmt):
    fmt = "<" + fmt
    size = struct.calcsize(fmt)
    if self.pos + size > len(self.data):
      raise ValueError(f"program truncated at byte {self.pos}: needs {size} more bytes")
    values = struct.unpack_from(fmt, self.data, self.pos)
    self.pos += size
    return values if len(values) > 1 else values[0]

  def bytes(self, n):
    if self.pos + n > len(self.data):
      raise ValueError(f"program truncated at byte {self.pos}: needs {n} more bytes")
    out = self.data[self.pos:self.pos + n]
    self.pos += n
    return out

  def str(self):
    return self.bytes(self.unpack("I")).decode("utf-8")

  def tile(self):
    memory, dtype, start, count, offset = self.unpack("BBHHI")
    free = tuple(self.unpack("iI") for _ in range(self.unpack("I")))
    return TileAP(Memory(memory), DType(dtype), start, count, offset, free)

  def hbm(self):
    tensor, offset = self.unpack("Iq")
    dims = tuple(self.unpack("qq") for _ in range(self.unpack("I")))
    return HbmAP(tensor, offset, dims)

  def scalar(self):
    dtype = DType(self.unpack("B"))
    if dtype.is_float:
      return Scalar(dtype, self.unpack("d"))
    return Scalar(dtype, self.unpack("Q" if dtype == DType.U64 else "q"))

  def operand(self, kind):
    if kind == "u8":
      return self.unpack("B")
    if kind == "u32":
      return self.unpack("I")
    if kind == "f32":
      return self.unpack("f")
    if kind == "i64_list":
      return [self.unpack("q") for _ in range(self.unpack("I"))]
    if kind == "tile":
      return self.tile()
    if kind == "hbm":
      return self.hbm()
    if kind == "hbm_list":
      return [self.hbm() for _ in range(self.unpack("I"))]
    if kind == "endpoint":
      return self.hbm() if self.unpack("B") == EndpointKind.HBM else self.tile()
    if kind == "scalar":
      return self.scalar()
    if kind == "scalar_operand":
      return self.scalar() if self.unpack("B") == ScalarKind.IMMEDIATE else self.tile()
    raise ValueError(f"unknown operand kind {kind!r}")


def read_program(data: bytes) -> Program:
  r = _Reader(bytes(data))
  if r.bytes(8) != MAGIC:
    raise ValueError("not a NeuronCore program (bad magic)")
  version = r.unpack("I")
  if not 1 <= version <= VERSION:
    raise ValueError(f"program format version {version}; this reader knows 1 to {VERSION}")
  target = r.str()
  tensors = []
  for _ in range(r.unpack("I")):
    name = r.str()
    kind, index, dtype = r.unpack("BIB")
    shape = tuple(r.unpack("q") for _ in range(r.unpack("I")))
    data = r.bytes(r.unpack("Q"))
    if dtype == DType.C64:  # as the loader reads it: f32 pairs
      tensors.append(Tensor(name, TensorKind(kind), index, DType.F32, shape + (2,), data, True))
    else:
      tensors.append(Tensor(name, TensorKind(kind), index, DType(dtype), shape, data))
  if version == 1:
    blocks = [Block(_read_streams(r))]
  else:
    blocks = [Block(_read_streams(r), _read_exit(r)) for _ in range(r.unpack("I"))]
  # Version 3 added each entry's lowering and rule.
  fields = 5 if version >= 3 else 3
  debug = [DebugEntry(*(r.str() for _ in range(fields))) for _ in range(r.unpack("I"))]
  source = r.str()
  if r.pos != len(r.data):
    raise ValueError(f"{len(r.data) - r.pos} trailing bytes after the program")
  return Program(target, tensors, blocks, debug, source)


def _read_streams(r: _Reader) -> list:
  """A block's instructions, stream by stream."""
  insts = []
  for _ in range(r.unpack("I")):
    stream = r.unpack("B")
    for _ in range(r.unpack("I")):
      opcode, debug_id = r.unpack("HI")
      opcode = Opcode(opcode)
      waits = [r.unpack("BI") for _ in range(r.unpack("I"))]
      operands = {name: r.operand(kind) for name, kind in OPERAND_LAYOUT[opcode]}
      insts.append(Instruction(opcode, stream, debug_id, operands, waits))
  return insts


def _read_exit(r: _Reader) -> Exit:
  op, debug_id = r.unpack("HI")
  op = ControlOp(op)
  if op == ControlOp.END:
    return Exit(op, debug_id)
  if op == ControlOp.JUMP:
    return Exit(op, debug_id, None, [r.unpack("I")])
  selector = r.hbm()
  if op == ControlOp.BRANCH:
    return Exit(op, debug_id, selector, list(r.unpack("II")))
  return Exit(op, debug_id, selector, [r.unpack("I") for _ in range(r.unpack("I"))])


def _format_tile(ap: TileAP) -> str:
  free = ",".join(f"{s}x{c}" for s, c in ap.free)
  return (f"{ap.memory.name}[{ap.partition_start}:{ap.partition_start + ap.partition_count}]"
          f"@{ap.address}:{ap.dtype.name.lower()}[{free}]")


def _format_hbm(ap: HbmAP, tensors) -> str:
  dims = ",".join(f"{s}x{c}" for s, c in ap.dims)
  name = tensors[ap.tensor].name if ap.tensor < len(tensors) else "?"
  return f"t{ap.tensor}({name})+{ap.offset}[{dims}]"


def _format_value(name, value, tensors) -> str:
  if isinstance(value, TileAP):
    return _format_tile(value)
  if isinstance(value, HbmAP):
    return _format_hbm(value, tensors)
  if isinstance(value, Scalar):
    return f"{value.dtype.name.lower()}({value.value!r})"
  if isinstance(value, list):
    return "[" + ", ".join(_format_value(name, v, tensors) for v in value) + "]"
  if name in ("op", "func"):
    return Alu(value).name.lower()
  if name == "flags":
    return "|".join(n for bit, n in ((MATMUL_START, "start"), (MATMUL_STOP, "stop"))
                    if value & bit) or "0"
  return repr(value)


def disassemble(data: bytes) -> str:
  """Readable text of a program: tensors, then each stream's instructions with their waits and
  debug entries."""
  return format_program(read_program(data))


def format_program(program: Program) -> str:
  """`disassemble`'s text of a Program, also of one not yet through the back end's stages (a
  DMA without a queue is listed under stream DMA?, a tile in an unplaced buffer at
  @<buffer>+<offset>)."""
  lines = [f"target {program.target}"]
  for i, t in enumerate(program.tensors):
    extra = f" ({len(t.data)} bytes)" if t.kind == TensorKind.CONSTANT else ""
    dtype, shape = t.table_dtype_shape
    pairs = " (f32 pairs)" if t.complex_pairs else ""
    lines.append(f"tensor t{i} {t.name!r} {TensorKind(t.kind).name.lower()}[{t.index}] "
                 f"{DType(dtype).name.lower()}{list(shape)}{pairs}{extra}")
  several = len(program.blocks) > 1
  for index, block in enumerate(program.blocks):
    if several:
      lines.append(f"block {index}:")
    lines.extend(_disassemble_streams(program, block.streams, "  " if several else ""))
    if block.exit.op != ControlOp.END or several:
      lines.append(("  " if several else "") + _format_exit(program, block.exit))
  return "\n".join(lines) + "\n"


def _debug_entry(program, debug_id: int):
  return program.debug[debug_id] if debug_id < len(program.debug) else None


def _format_exit(program: Program, exit_: Exit) -> str:
  text = f"exit {exit_.op.name.lower()}"
  if exit_.selector is not None:
    text += " " + _format_hbm(exit_.selector, program.tensors)
  if exit_.targets:
    text += " -> " + ", ".join(f"block {t}" for t in exit_.targets)
  debug = _debug_entry(program, exit_.debug_id)
  if debug and debug.op and exit_.op != ControlOp.END:
    text += _format_debug(debug)
  return text


def _format_debug(debug: DebugEntry) -> str:
  """"  # stablehlo.add jit(f)/add f.py:3:4 [native elementwise.lower_elementwise]"."""
  text = f"  # {debug.op} {debug.name} {debug.location}".rstrip()
  if debug.lowering:
    text += f" [{debug.lowering} {debug.rule}]" if debug.rule else f" [{debug.lowering}]"
  return text


def _disassemble_streams(program: Program, streams: dict, indent: str) -> list:
  lines = []
  for stream in sorted(streams, key=lambda s: (s is None, s or 0)):
    lines.append(f"{indent}stream {'DMA?' if stream is None else stream_name(stream)}:")
    for pos, inst in enumerate(streams[stream], 1):
      waits = " ".join(f"{stream_name(s)}>={c}" for s, c in inst.waits)
      args = " ".join(f"{name}={_format_value(name, inst.operands[name], program.tensors)}"
                      for name, _ in OPERAND_LAYOUT[inst.opcode])
      debug = _debug_entry(program, inst.debug_id)
      note = _format_debug(debug) if debug and debug.op else ""
      wait_text = f" wait[{waits}]" if waits else ""
      lines.append(f"{indent}  {pos:4d} {inst.opcode.name.lower()}{wait_text} {args}{note}")
  return lines
