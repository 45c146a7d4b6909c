"""Parses program bytes back into Python objects and disassembles them as text (golden snapshots,
tests, debugging compiler output). The C++ loader is the validating reader; this one checks only
what it needs to parse."""

import dataclasses
import struct

from .enums import (MATMUL_START, MATMUL_STOP, Alu, ControlOp, DType, EndpointKind, Memory, Opcode,
                    RowSum, ScalarKind, TensorKind, core_of, stream_name)
from .instructions import (FIELD_SINCE, OPERAND_LAYOUT, TILE_FIELDS, WIDE_NIBBLE_TYPES, Block,
                           DebugEntry, Exit, Instruction, Loop, Tensor, TileStep, hbm_operand_keys,
                           operand_layout, tile_operand_keys)
from .operands import HbmAP, Scalar, TileAP
from .region_text import format_region
from .writer import MAGIC, STEP_BASE, STEP_TILE, STEP_WAIT, VERSION, loop_runs


@dataclasses.dataclass
class Program:
  target: str
  tensors: list
  blocks: list  # [Block]; execution starts at blocks[0]
  debug: list
  source: str
  cores: int = 1  # physical cores (version 6)

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
    if kind == "u64":
      return self.unpack("Q")
    if kind == "f32":
      return self.unpack("f")
    if kind == "i64":
      return self.unpack("q")
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
    if kind == "row_sum":
      return RowSum(self.unpack("B"))
    raise ValueError(f"unknown operand kind {kind!r}")


def read_program(data: bytes) -> Program:
  r = _Reader(bytes(data))
  if r.bytes(8) != MAGIC:
    raise ValueError("not a NeuronCore program (bad magic)")
  version = r.unpack("I")
  if not 1 <= version <= VERSION:
    raise ValueError(f"program format version {version}; this reader knows 1 to {VERSION}")
  target = r.str()
  cores = r.unpack("B") if version >= 6 else 1
  tensors = []
  for _ in range(r.unpack("I")):
    name = r.str()
    kind, index = r.unpack("BI")
    output = r.unpack("I") if kind == TensorKind.DONATED_PARAMETER else 0
    dtype = r.unpack("B")
    shape = tuple(r.unpack("q") for _ in range(r.unpack("I")))
    data = r.bytes(r.unpack("Q"))
    if dtype == DType.C64:  # as the loader reads it: f32 pairs
      tensors.append(Tensor(name, TensorKind(kind), index, DType.F32, shape + (2,), data, output,
                            complex_pairs=True))
    elif dtype in WIDE_NIBBLE_TYPES:  # as the loader reads it: the same bytes as s8/u8
      tensors.append(Tensor(name, TensorKind(kind), index, WIDE_NIBBLE_TYPES[dtype], shape, data,
                            output, nibbles=True))
    else:
      tensors.append(Tensor(name, TensorKind(kind), index, DType(dtype), shape, data, output))
  if version == 1:
    blocks = [Block(_read_streams(r, version))]
  else:
    blocks = [Block(_read_streams(r, version), _read_exit(r)) for _ in range(r.unpack("I"))]
  # Version 3 added each entry's lowering and rule.
  fields = 5 if version >= 3 else 3
  debug = [DebugEntry(*(r.str() for _ in range(fields))) for _ in range(r.unpack("I"))]
  source = r.str()
  if r.pos != len(r.data):
    raise ValueError(f"{len(r.data) - r.pos} trailing bytes after the program")
  return Program(target, tensors, blocks, debug, source, cores)


def _read_streams(r: _Reader, version: int) -> list:
  """A block's instructions, stream by stream (each stream's loops: Loop objects of its own)."""
  insts = []
  for _ in range(r.unpack("I")):
    stream = r.unpack("B")
    own, pending = [], []
    for _ in range(r.unpack("I")):
      opcode, debug_id = r.unpack("HI")
      opcode = Opcode(opcode)
      waits = [r.unpack("BI") for _ in range(r.unpack("I"))]
      stored = dict(operand_layout(opcode, version))
      operands = {}
      for name, kind in OPERAND_LAYOUT[opcode]:
        if name not in stored:
          operands[name] = FIELD_SINCE[(opcode, name)][1]
        elif kind == "summed_tile":
          operands[name] = r.tile() if operands["sum_of"] != RowSum.NONE else None
        else:
          operands[name] = r.operand(kind)
      own.append(Instruction(opcode, stream, debug_id, operands, waits, core=core_of(stream)))
    open_loops = []  # (end, Loop) of the loops holding the current one (sorted, nested)
    for _ in range(r.unpack("I") if version >= 4 else 0):
      first, length, count, num_steps = r.unpack("IIII")
      while open_loops and open_loops[-1][0] <= first:
        open_loops.pop()
      loop = Loop(count, parent=open_loops[-1][1] if open_loops else None)
      open_loops.append((first + length, loop))
      for inst in own[first:first + length]:
        inst.loop = loop  # a nested loop, read later, takes its own instructions
      steps = []
      for _ in range(num_steps):
        step = r.unpack("IBBq")
        steps.append(step + (r.unpack("BII") if step[1] == STEP_TILE else None,))
      pending.append((loop, first, steps))
    for loop, first, steps in pending:  # each instruction's innermost loop is known now
      for index, kind, field, step, tail in steps:
        inst = own[first + index]
        steps_of, wait_steps = inst.steps_of(loop)
        if kind == STEP_WAIT:
          wait_steps[inst.waits[field][0]] = step
        elif kind == STEP_BASE:
          steps_of["base"] = step
        elif kind == STEP_TILE:
          code, period, phase = tail
          steps_of[(tile_operand_keys(inst)[field], TILE_FIELDS[code])] = TileStep(
              step, period, phase)
        else:
          steps_of[hbm_operand_keys(inst)[field]] = step
    insts.extend(own)
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
  if name == "sum_of":
    return RowSum(value).name.lower()
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
  if program.cores > 1:
    lines.append(f"physical cores {program.cores}")
  for i, t in enumerate(program.tensors):
    extra = f" ({len(t.data)} bytes)" if t.kind == TensorKind.CONSTANT else ""
    dtype, shape = t.table_dtype_shape
    pairs = (" (f32 pairs)" if t.complex_pairs
             else f" (as {DType(t.dtype).name.lower()})" if t.nibbles else "")
    if t.kind == TensorKind.DONATED_PARAMETER:
      extra = f" (its buffer is output[{t.output}])"
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


# The counter names of nested loops in the disassembly, outermost first.
_COUNTERS = "ijklmnop"


def _disassemble_streams(program: Program, streams: dict, indent: str) -> list:
  lines = []
  for stream in sorted(streams, key=lambda s: (s is None, s or 0)):
    lines.append(f"{indent}stream {'DMA?' if stream is None else stream_name(stream)}:")
    runs = {}
    for first, length, loop in loop_runs(streams[stream]):
      runs.setdefault(first, []).append((length, loop))
    for pos, inst in enumerate(streams[stream], 1):
      for length, loop in runs.get(pos - 1, ()):
        depth = len(loop.chain())
        counter = _COUNTERS[depth - 1]
        lines.append(f"{indent}{'  ' * depth}loop x{loop.count} (instructions {pos}.."
                     f"{pos - 1 + length}, {counter} = 0..{loop.count - 1}):")
      inner = "  " * len(inst.loops())
      waits = " ".join(f"{stream_name(s)}>={c}{_step_text(inst, lambda w: w[1].get(s, 0))}"
                       for s, c in inst.waits)
      args = " ".join(f"{name}={_format_operand(inst, name, program.tensors)}"
                      for name, _ in OPERAND_LAYOUT[inst.opcode])
      debug = _debug_entry(program, inst.debug_id)
      note = _format_debug(debug) if debug and debug.op else ""
      wait_text = f" wait[{waits}]" if waits else ""
      lines.append(f"{indent}{inner}  {pos:4d} {inst.opcode.name.lower()}{wait_text} {args}{note}")
  return lines


def _step_text(inst: Instruction, step_of) -> str:
  """"+512i+8j": what `step_of((steps, wait_steps))` gives per iteration of each loop holding
  `inst` (outermost first: i, j, ...)."""
  return "".join(f"{step:+d}{_COUNTERS[d]}" for d, loop in enumerate(inst.loops())
                 if (step := step_of(inst.steps_of(loop))))


def _format_operand(inst: Instruction, name: str, tensors) -> str:
  """An operand with its per-iteration offset steps ("t0(x)+0+512i[...]")."""
  value = inst.operands[name]
  if name == "region":
    return format_region(value)
  if isinstance(value, list):
    return "[" + ", ".join(_with_step(_format_value(name, v, tensors),
                                      _step_text(inst, lambda st, k=k: st[0].get((name, k))))
                           for k, v in enumerate(value)) + "]"
  if isinstance(value, TileAP):
    return _format_value(name, value, tensors) + _tile_step_text(inst, name)
  return _with_step(_format_value(name, value, tensors),
                    _step_text(inst, lambda st: st[0].get(name)))


def _tile_step_text(inst: Instruction, name: str) -> str:
  """" step[@+256i%4~1 p+32j]": how tile operand `name` moves per iteration of each loop
  (@ its byte offset, p its partition start; %period ~phase of a rotation)."""
  moves = []
  for d, loop in enumerate(inst.loops()):
    for code, field in ((("@", "byte_offset"), ("p", "partition_start"))):
      step = inst.steps_of(loop)[0].get((name, field))
      if step is not None:
        rotation = f"%{step.period}~{step.phase}" if step.period else ""
        moves.append(f"{code}{step.step:+d}{_COUNTERS[d]}{rotation}")
  return f" step[{' '.join(moves)}]" if moves else ""


def _with_step(text: str, step: str) -> str:
  if not step:
    return text
  if "[" not in text:  # a stepped number (an iota's base)
    return text + step
  at = text.index("[")
  return text[:at] + step + text[at:]
