"""KernelProgram: a traced custom kernel (jax_trn.nki) as NeuronCore instructions over its own
HBM tensors and two on-chip arenas, the payload of the `trn_kernel` custom call.

A kernel is traced once per shape signature into instructions that address
- kernel tensors by index: its inputs, its outputs, the HBM scratch it declares and the
  constants it needs (memset values and iota patterns, DMA'd into tiles), and
- SBUF/PSUM tiles at byte offsets inside the kernel's SBUF arena and PSUM arena (the tracer
  placed every tile itself, by liveness, as the NKI compiler does).
`emit` appends those instructions to any ProgramBuilder: the compiler's lowering rule
(lowering/kernel_call.py) binds the inputs and outputs to the custom call's operand and result
tensors; jax_trn.nki's NumPy path binds them to a program's parameters and outputs. The arenas
become two ARENA buffers that the back end's plan-memory stage places, so a kernel is scheduled
with the rest of the program by the same back end (queues, semaphores).

`encode`/`decode` carry it as text (zlib-compressed JSON, base64) inside the custom call's
backend_config. Each instruction is a ProgramBuilder method name and its keyword operands, so a
kernel can hold only what the builder can build and the loader then checks.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import zlib
from typing import Callable

from .buffers import ARENA, Address
from .builder import ProgramBuilder
from .enums import DType, Memory
from .operands import HbmAP, Scalar, TileAP

# 2: instructions carry their physical core; device_print snapshots. 3: and their epoch (the
# core barriers their program passed before them); version 2 payloads read as epoch 0. 4:
# activation_reduce may sum its activated values before their rounding (sum_before_rounding).
FORMAT_VERSION = 4
INPUT, OUTPUT, SCRATCH, CONSTANT = "input", "output", "scratch", "constant"

# The ProgramBuilder methods a kernel may call (engine instructions; no control flow, no GpSimd
# general-purpose ops over HBM).
METHODS = frozenset({"dma_copy", "matmul", "transpose", "tensor_tensor", "tensor_scalar",
                     "tensor_reduce", "tensor_copy", "tensor_ternary", "tensor_unary",
                     "scalar_tensor_tensor", "bn_stats", "bn_aggr", "activation",
                     "activation_reduce"})


@dataclasses.dataclass(frozen=True)
class KernelTensor:
  kind: str      # INPUT | OUTPUT | SCRATCH | CONSTANT
  index: int     # input / output number (0 otherwise)
  dtype: DType
  shape: tuple
  name: str = ""
  data: bytes = b""  # CONSTANT: the row-major bytes (memset values, iota patterns)


@dataclasses.dataclass
class KernelInstruction:
  method: str     # a ProgramBuilder method in METHODS
  operands: dict  # its keyword arguments: TileAPs at arena offsets, HbmAPs over kernel tensors
  line: int       # index into KernelProgram.lines
  core: int = 0   # the physical core of an LNC=2 device that runs it (a grid's programs)
  epoch: int = 0  # how many nisa.core_barrier calls its program made before it


@dataclasses.dataclass
class KernelProgram:
  name: str
  tensors: list            # [KernelTensor]
  instructions: list       # [KernelInstruction]
  lines: list              # kernel source positions "file.py:12"
  sbuf_bytes: int = 0      # bytes per partition of the SBUF arena
  psum_bytes: int = 0      # bytes per partition of the PSUM arena
  # nl.device_print: (output number, prefix) of each printed snapshot, outputs after the
  # kernel's returned ones (the compiler treats them as any output; jax_trn prints them)
  prints: list = dataclasses.field(default_factory=list)

  def of_kind(self, kind: str) -> list:
    """(tensor index, KernelTensor) of `kind`, by their input/output number."""
    found = [(i, t) for i, t in enumerate(self.tensors) if t.kind == kind]
    return sorted(found, key=lambda it: it[1].index)

  # --- emission -----------------------------------------------------------------------------

  @property
  def cores(self) -> int:
    """The physical cores the kernel's programs use (1, or 2 for a grid over both)."""
    return 1 + max((inst.core for inst in self.instructions), default=0)

  @property
  def epochs(self) -> int:
    """The stretches its programs' core barriers cut them into (1 without barriers)."""
    return 1 + max((inst.epoch for inst in self.instructions), default=0)

  def emit(self, builder: ProgramBuilder, inputs: list, outputs: list,
           debug_for_line: Callable[[str], int], physical_cores: int = 1) -> None:
    """Appends the kernel's instructions to `builder`. `inputs` / `outputs`: one (builder tensor,
    element offset) per kernel input / output, holding it densely row-major; scratch tensors
    become temporaries. `debug_for_line(position)` gives the debug id of a kernel line.

    A kernel whose programs use two cores runs each core's instructions on that physical core
    (`on_core`, one split per epoch: the tracer proved their HBM writes between two core
    barriers disjoint) when the device has `physical_cores` 2; on one core otherwise, epoch by
    epoch, core 0's instructions of each first. Both cores' tiles
    lie in one arena per memory (each core's own SBUF/PSUM)."""
    bound = {}
    for kind, given in ((INPUT, inputs), (OUTPUT, outputs)):
      declared = self.of_kind(kind)
      if len(given) != len(declared):
        raise ValueError(f"kernel {self.name} takes {len(declared)} {kind}s, got {len(given)}")
      for (k, _), binding in zip(declared, given):
        bound[k] = binding
    for k, t in enumerate(self.tensors):
      if t.kind == SCRATCH:
        bound[k] = (builder.tensor("temporary", t.dtype, t.shape, name=t.name), 0)
      elif t.kind == CONSTANT:
        bound[k] = (builder.constant(t.dtype, t.shape, t.data, name=t.name), 0)
    arenas = {}
    for memory, size in ((Memory.SBUF, self.sbuf_bytes), (Memory.PSUM, self.psum_bytes)):
      if size:
        arenas[memory] = Address(builder.new_buffer(memory, size, ARENA))
    debug_ids = [debug_for_line(position) for position in self.lines]

    def rebase(value):
      if isinstance(value, TileAP):
        return dataclasses.replace(value, byte_offset=arenas[value.memory] + value.byte_offset)
      if isinstance(value, HbmAP):
        tensor, offset = bound[value.tensor]
        return HbmAP(tensor, offset + value.offset, value.dims)
      return value

    def emit_all(instructions):
      for inst in instructions:
        operands = {name: rebase(value) for name, value in inst.operands.items()}
        method = getattr(builder, inst.method)
        if inst.method == "dma_copy":
          method(None, debug=debug_ids[inst.line], **operands)
        else:
          method(debug=debug_ids[inst.line], **operands)

    # Epoch by epoch (the stretches between core barriers), each core's instructions of an
    # epoch one share of a split: the back end orders what an epoch's instructions touch after
    # every earlier epoch's accesses to the same memory, on either core.
    for epoch in range(self.epochs):
      by_core = [[inst for inst in self.instructions if inst.core == core and inst.epoch == epoch]
                 for core in range(self.cores)]
      if self.cores == 1 or physical_cores < 2:
        emit_all(inst for instructions in by_core for inst in instructions)
        continue
      split = builder.new_split()
      for core, instructions in enumerate(by_core):
        with builder.on_core(core, split):
          emit_all(instructions)

  # --- text form ----------------------------------------------------------------------------

  def encode(self) -> str:
    doc = {"version": FORMAT_VERSION, "name": self.name, "sbuf": self.sbuf_bytes,
           "psum": self.psum_bytes, "lines": self.lines, "prints": self.prints,
           "tensors": [[t.kind, t.index, int(t.dtype), list(t.shape), t.name,
                        base64.b64encode(t.data).decode("ascii")] for t in self.tensors],
           "instructions": [[i.method, {k: _encode(v) for k, v in i.operands.items()}, i.line,
                             i.core, i.epoch] for i in self.instructions]}
    text = json.dumps(doc, separators=(",", ":")).encode()
    return base64.b64encode(zlib.compress(text, 6)).decode("ascii")

  @classmethod
  def decode(cls, text: str) -> "KernelProgram":
    try:
      doc = json.loads(zlib.decompress(base64.b64decode(text)))
    except (ValueError, zlib.error) as e:
      raise ValueError(f"not a jax_trn kernel payload: {e}") from None
    if doc.get("version") not in range(2, FORMAT_VERSION + 1):
      raise ValueError(f"kernel payload version {doc.get('version')}; this compiler reads "
                       f"2 to {FORMAT_VERSION} (retrace the kernel with this jax_trn)")
    tensors = [KernelTensor(kind, index, DType(dtype), tuple(shape), name, base64.b64decode(data))
               for kind, index, dtype, shape, name, data in doc["tensors"]]
    instructions = []
    for method, operands, line, core, *epoch in doc["instructions"]:
      if method not in METHODS:
        raise ValueError(f"kernel payload calls {method!r}, not a kernel instruction")
      if core not in (0, 1):
        raise ValueError(f"kernel payload puts {method} on core {core}: a device has cores 0, 1")
      instructions.append(KernelInstruction(method, {k: _decode(v) for k, v in operands.items()},
                                            line, core, epoch[0] if epoch else 0))
    return cls(doc["name"], tensors, instructions, list(doc["lines"]), doc["sbuf"], doc["psum"],
               [(int(number), str(prefix)) for number, prefix in doc["prints"]])


def _encode(value):
  if value is None:  # an optional operand left out
    return None
  if isinstance(value, TileAP):
    if value.buffer is not None:
      raise ValueError(f"kernel tile {value} is not placed in its arena")
    return {"tile": [int(value.memory), int(value.dtype), value.partition_start,
                     value.partition_count, value.byte_offset, [list(d) for d in value.free]]}
  if isinstance(value, HbmAP):
    return {"hbm": [value.tensor, value.offset, [list(d) for d in value.dims]]}
  if isinstance(value, Scalar):
    return {"imm": [int(value.dtype), value.value]}
  if isinstance(value, (bool, int, float)):
    return value
  raise TypeError(f"kernel operand {value!r} has no text form")


def _decode(value):
  if not isinstance(value, dict):
    return value
  if "tile" in value:
    memory, dtype, start, count, offset, free = value["tile"]
    return TileAP(Memory(memory), DType(dtype), start, count, offset, tuple(map(tuple, free)))
  if "hbm" in value:
    tensor, offset, dims = value["hbm"]
    return HbmAP(tensor, offset, tuple(map(tuple, dims)))
  if "imm" in value:
    dtype, v = value["imm"]
    return Scalar(DType(dtype), v)
  raise ValueError(f"kernel operand {value!r} is not a tile, HBM pattern or immediate")
