"""KernelTrace: the state of one kernel being traced. nki.language / nki.isa calls record
ProgramBuilder-method instructions here, each with the kernel line that made it; `finish`
places the tiles (allocate.py) and returns the KernelProgram (hlo_lowering.program.kernel_program).

The kernel's Python runs once per launch (per grid point): loops are unrolled, values are
static, so every instruction and tile is known when tracing ends. Each instruction runs on the
physical core of its grid point (cores.py); each core's tiles are placed in its own SBUF/PSUM.
The programs are traced in turn, switching at core barriers (programs.py), and each
instruction records its epoch: the barriers its program passed before it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math

import numpy as np

from hlo_lowering.program import DType, HbmAP, Memory, TileAP
from hlo_lowering.program.kernel_program import (CONSTANT, INPUT, OUTPUT, SCRATCH,
                                                  KernelInstruction, KernelProgram, KernelTensor)
from jax_trn.nki import allocate, cores, rules
from jax_trn.nki.written import WRITTEN_OPERANDS, WrittenElements
from jax_trn.nki.errors import kernel_error, kernel_position
from jax_trn.nki.programs import ProgramRunner
from jax_trn.nki.tensors import HBM, Allocation, NkiTensor

_CURRENT: list["KernelTrace"] = []


def current() -> "KernelTrace":
  if not _CURRENT:
    raise kernel_error("nki.language / nki.isa calls run only inside a kernel being traced "
                       "(decorate it with jax_trn.nki.jit and call it)")
  return _CURRENT[-1]


class KernelTrace:
  def __init__(self, name: str, target_spec: dict, grid: tuple = ()):
    self.name = name
    self.spec = target_spec
    self.grid = grid
    self.program_index: tuple = (0,) * len(grid)
    self.core = 0  # the physical core of the grid point being traced
    self.epoch = 0  # the core barriers that program has passed (programs.py)
    self._runner: ProgramRunner | None = None
    self._program = 0  # the grid point's number in the runner
    self.tensors: list[KernelTensor] = []
    self.allocations: list[Allocation] = []
    self.instructions: list[KernelInstruction] = []
    self.lines: list[str] = []
    self._line_index: dict[str, int] = {}
    # Grid points share the kernel's shared_hbm tensors: the i-th one each point creates.
    self._hbm_by_order: list[int] = []
    self._hbm_created = 0
    self._constants: dict[tuple, int] = {}
    self._prints: list[tuple[int, str]] = []  # nl.device_print: (snapshot tensor, prefix)
    self._written = WrittenElements()
    # Open PSUM accumulation groups: dst key -> (index of the group's last matmul, its dst).
    self._open_groups: dict[tuple, tuple] = {}

  @contextlib.contextmanager
  def active(self, program_index: tuple = ()):
    self.program_index = program_index
    self.core = cores.core_of(self.grid, program_index)
    self._hbm_created = 0
    self.epoch = 0
    _CURRENT.append(self)
    try:
      yield self
    finally:
      _CURRENT.pop()

  def run_programs(self, points: list, body) -> list:
    """body() traced once per grid point (programs.py: in turn, switching programs at core
    barriers); the values it returned, by point."""
    states = {i: None for i in range(len(points))}

    def enter(i):
      if states[i] is not None:
        self.program_index, self.core, self._hbm_created, self.epoch = states[i]
      self._program = i

    def leave(i):
      states[i] = (self.program_index, self.core, self._hbm_created, self.epoch)

    def program(i):
      with self.active(points[i]):
        enter(i)
        return body()

    self._runner = ProgramRunner(points, enter, leave)
    try:
      returned = self._runner.run(program)
    finally:
      counts, self._runner = self._runner.barriers, None
    if len(set(counts)) > 1:
      fewest = counts.index(min(counts))
      raise kernel_error(f"program {points[fewest]} of the launch grid reached "
                         f"{min(counts)} nisa.core_barrier calls and program "
                         f"{points[counts.index(max(counts))]} {max(counts)}: every program "
                         "must reach every barrier (on the chip the cores would wait forever)",
                         position="")
    return returned

  def core_barrier(self, data: NkiTensor) -> None:
    """Both cores' programs reach this point before either continues (nisa.core_barrier)."""
    if len(self.grid) != 1 or cores.core_axis(self.grid) is None or self.grid[0] != cores.CORES:
      raise kernel_error(f"nisa.core_barrier in a kernel launched over grid "
                         f"{tuple(map(int, self.grid))}: launch it as kernel[nl.nc(2)] (one "
                         "program per physical core)")
    if data.buffer != HBM:
      raise kernel_error(f"nisa.core_barrier data {data.describe()} must be the shared HBM "
                         "tensor the cores exchange")
    self._runner.barrier(self._program)
    self.epoch += 1

  # --- tensors ------------------------------------------------------------------------------

  def add_input(self, shape, dtype, name: str) -> NkiTensor:
    index = sum(t.kind == INPUT for t in self.tensors)
    self.tensors.append(KernelTensor(INPUT, index, DType.from_numpy(dtype), tuple(shape), name))
    return NkiTensor(HBM, shape, dtype, len(self.tensors) - 1, name=name)

  def new_hbm(self, shape, dtype, name: str = "") -> NkiTensor:
    """A kernel HBM tensor: an output if the kernel returns it, scratch otherwise."""
    order = self._hbm_created
    self._hbm_created += 1
    if order < len(self._hbm_by_order):
      index = self._hbm_by_order[order]
      known = self.tensors[index]
      if known.shape != tuple(shape) or known.dtype != DType.from_numpy(dtype):
        raise kernel_error(f"grid point {self.program_index} creates HBM tensor #{order} as "
                           f"{tuple(shape)} {dtype}, other points as {known.shape} "
                           f"{known.dtype.name.lower()}")
    else:
      self.tensors.append(KernelTensor(SCRATCH, 0, DType.from_numpy(dtype), tuple(shape),
                                       name or f"hbm{len(self.tensors)}"))
      index = len(self.tensors) - 1
      self._hbm_by_order.append(index)
    return NkiTensor(HBM, shape, dtype, index, name=name)

  def new_print(self, prefix: str, shape, dtype) -> NkiTensor:
    """An HBM snapshot of a value nl.device_print prints (an extra kernel output)."""
    self.tensors.append(KernelTensor(SCRATCH, 0, DType.from_numpy(dtype), tuple(shape),
                                     f"print{len(self._prints)}"))
    self._prints.append((len(self.tensors) - 1, prefix))
    return NkiTensor(HBM, shape, dtype, len(self.tensors) - 1)

  def constant(self, array: np.ndarray) -> NkiTensor:
    """An HBM constant holding `array` (one per distinct content)."""
    array = np.ascontiguousarray(array)
    key = (array.dtype.str, array.shape, array.tobytes())
    index = self._constants.get(key)
    if index is None:
      self.tensors.append(KernelTensor(CONSTANT, 0, DType.from_numpy(array.dtype), array.shape,
                                       f"const{len(self._constants)}", array.tobytes()))
      index = self._constants[key] = len(self.tensors) - 1
    return NkiTensor(HBM, array.shape, array.dtype, index)

  def new_tile(self, buffer: str, shape, dtype) -> NkiTensor:
    shape = tuple(int(d) for d in shape)
    rules.check_new_tile(self, buffer, shape, dtype)
    size = math.prod(shape[1:]) * dtype.itemsize
    allocation = Allocation(len(self.allocations), buffer, shape[0], size, kernel_position(),
                            f"{buffer} {shape} {dtype}")
    self.allocations.append(allocation)
    return NkiTensor(buffer, shape, dtype, allocation)

  # --- instructions -------------------------------------------------------------------------

  def emit(self, method: str, **operands) -> int:
    """Records one instruction (a ProgramBuilder method and its operands) at the kernel line."""
    position = kernel_position()
    line = self._line_index.get(position)
    if line is None:
      line = self._line_index[position] = len(self.lines)
      self.lines.append(position)
    self._check_initialised(method, operands)
    self._close_groups_touching(method, operands)
    self.instructions.append(KernelInstruction(method, operands, line, self.core, self.epoch))
    return len(self.instructions) - 1

  def _check_initialised(self, method: str, operands: dict) -> None:
    tiles = [(name, v) for name, v in operands.items()
             if isinstance(v, TileAP) and v.buffer is not None]
    for name, tile in tiles:
      reads = name not in WRITTEN_OPERANDS or (method == "matmul" and not operands["start"])
      if not reads:
        continue
      allocation = self.allocations[tile.buffer.id]
      unwritten = self._written.first_unwritten(allocation, tile)
      if unwritten is not None:
        raise kernel_error(f"{method} reads uninitialised memory: element {unwritten} of "
                           f"{allocation.description} (created at {allocation.position}) was "
                           f"never written (operand {name.rstrip('_')})")
    for name, tile in tiles:
      if name in WRITTEN_OPERANDS:
        self._written.mark(self.allocations[tile.buffer.id], tile)

  def emit_matmul(self, dst: TileAP, stationary: TileAP, moving: TileAP,
                  accumulate: bool | None) -> None:
    """A matmul into PSUM: starts a new accumulation group unless it continues (accumulate
    None: when dst is the destination of an open group) the group of its destination. Groups
    into disjoint parts of one PSUM tile stay open side by side (k outer, n inner loops)."""
    key = (dst.buffer.id, dst.partition_start, dst.partition_count, dst.byte_offset, dst.free)
    previous = self._open_groups.pop(key, None)
    if accumulate and previous is None:
      raise kernel_error("nc_matmul(accumulate=True) into a PSUM tile no matmul has written "
                         "since it was last read or overwritten")
    start = previous is None or accumulate is False
    if previous is not None and not start:
      self.instructions[previous[0]].operands["stop"] = False
    index = self.emit("matmul", dst=dst, stationary=stationary, moving=moving, start=start,
                      stop=True)
    self._open_groups[key] = (index, dst)

  def _close_groups_touching(self, method: str, operands: dict) -> None:
    """Any other access to part of a PSUM tile ends the accumulation groups into that part."""
    if not self._open_groups:
      return
    for tile in operands.values():
      if isinstance(tile, TileAP) and tile.buffer is not None and tile.memory == Memory.PSUM:
        for key, (_, group_dst) in list(self._open_groups.items()):
          if _overlap(tile, group_dst):
            del self._open_groups[key]


  # --- the result ---------------------------------------------------------------------------

  def finish(self, returned: list[NkiTensor]) -> KernelProgram:
    for inst in self.instructions:
      dst = inst.operands.get("dst")
      if isinstance(dst, HbmAP) and self.tensors[dst.tensor].kind in (INPUT, CONSTANT):
        raise kernel_error(f"kernel {self.name} writes its input "
                           f"{self.tensors[dst.tensor].name!r}: inputs are read-only; return "
                           "outputs created with nl.ndarray(..., buffer=nl.shared_hbm)",
                           self.lines[inst.line])
    tensors = list(self.tensors)
    for number, tensor in enumerate(returned):
      if not isinstance(tensor, NkiTensor) or tensor.buffer != HBM:
        raise kernel_error(f"kernel {self.name} returns {tensor!r}: a kernel returns HBM "
                           "tensors (nl.ndarray(..., buffer=nl.shared_hbm))", position="")
      declared = tensors[tensor.storage]
      if declared.kind != SCRATCH or tensor.offset or tensor.shape != declared.shape:
        raise kernel_error(f"kernel {self.name} returns {tensor.describe()}: return whole "
                           "tensors the kernel created in HBM (not its inputs or views)",
                           position="")
      tensors[tensor.storage] = dataclasses.replace(declared, kind=OUTPUT, index=number,
                                                    name=declared.name or f"out{number}")
    prints = []
    for number, (index, prefix) in enumerate(self._prints, start=len(returned)):
      tensors[index] = dataclasses.replace(tensors[index], kind=OUTPUT, index=number)
      prints.append((number, prefix))
    cores.check_no_cross_core_races(self.instructions, tensors, self.lines, (OUTPUT, SCRATCH))
    addresses, sbuf_bytes, psum_bytes = self._place_tiles()
    instructions = [dataclasses.replace(inst, operands={k: _placed(v, addresses)
                                                        for k, v in inst.operands.items()})
                    for inst in self.instructions]
    return KernelProgram(self.name, tensors, instructions, self.lines, sbuf_bytes, psum_bytes,
                         prints)


  def _place_tiles(self) -> tuple[dict, int, int]:
    """Each core's tiles placed in its own SBUF/PSUM: {allocation id: offset}, and the arena
    sizes (the larger core's)."""
    used_on: dict[int, int] = {}
    for inst in self.instructions:
      for value in inst.operands.values():
        if isinstance(value, TileAP) and value.buffer is not None:
          core = used_on.setdefault(value.buffer.id, inst.core)
          if core != inst.core:
            allocation = self.allocations[value.buffer.id]
            raise kernel_error(f"tile {allocation.description} (created at "
                               f"{allocation.position}) is used by programs on both physical "
                               "cores: each core has its own SBUF and PSUM",
                               self.lines[inst.line])
    addresses, sbuf_bytes, psum_bytes = {}, 0, 0
    for core in sorted({inst.core for inst in self.instructions}):
      placed, sbuf, psum = allocate.place(
          self.allocations, [i for i in self.instructions if i.core == core], self.spec)
      addresses.update(placed)
      sbuf_bytes, psum_bytes = max(sbuf_bytes, sbuf), max(psum_bytes, psum)
    return addresses, sbuf_bytes, psum_bytes


def _placed(value, addresses: dict):
  if isinstance(value, TileAP) and value.buffer is not None:
    return dataclasses.replace(value, byte_offset=addresses[value.buffer.id] + value.byte_offset,
                               buffer=None)
  return value


def _overlap(a: TileAP, b: TileAP) -> bool:
  """Whether two tiles of the kernel may share bytes (same allocation, overlapping partition and
  byte ranges)."""
  if a.buffer.id != b.buffer.id:
    return False
  a_low, a_high = a.byte_range()
  b_low, b_high = b.byte_range()
  partitions = (a.partition_start < b.partition_start + b.partition_count
                and b.partition_start < a.partition_start + a.partition_count)
  return partitions and a_low < b_high and b_low < a_high
