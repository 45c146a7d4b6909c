"""Which physical NeuronCore runs each program of a launch grid, and the check that programs on
different cores do not race through HBM.

An LNC=2 device is two physical cores sharing HBM (NKI's "LNC overview"). A grid dimension
marked `nl.nc(2)` (`kernel[nl.nc(2), 4]`), or else a first grid dimension of even size
(`kernel[2]`, NKI's way to launch on both cores), is the core dimension: its first half of
program ids runs on core 0, the second half on core 1 (NKI's `spmd_dim` distribution:
`kernel[4]` puts programs 0, 1 on core 0 and 2, 3 on core 1). Every other grid dimension runs
on the core of its point. The compiler folds both cores' programs onto one core (core 0's
first) when the device has one physical core (trn1, LNC=1), so a kernel's results never depend
on the device.

The cores run concurrently, synchronised only by `nisa.core_barrier` (both cores reach it
before either goes on), so between two barriers a program must not touch HBM elements another
core's programs write: `check_no_cross_core_races` refuses such a kernel, naming both
instructions (as the cores could see either order on a chip).
"""

from __future__ import annotations

import numpy as np

from hlo_lowering.program import HbmAP
from jax_trn.nki.errors import kernel_error

CORES = 2  # physical cores of an LNC=2 device


class NcDim(int):
  """nl.nc(n): a launch-grid dimension distributed over n physical NeuronCores."""


def core_axis(grid: tuple) -> int | None:
  """The grid dimension whose programs are spread over the cores, or None (one core)."""
  marked = [axis for axis, size in enumerate(grid) if isinstance(size, NcDim)]
  if len(marked) > 1:
    raise kernel_error(f"launch grid {tuple(map(int, grid))} marks {len(marked)} dims with "
                       "nl.nc: at most one dim is spread over the cores", position="")
  if marked:
    if grid[marked[0]] % CORES:
      raise kernel_error(f"launch grid dim nl.nc({int(grid[marked[0]])}): an LNC=2 device "
                         f"has {CORES} physical cores; the dim must be a multiple of it",
                         position="")
    return marked[0]
  return 0 if grid and grid[0] % CORES == 0 else None


def core_of(grid: tuple, point: tuple) -> int:
  """The physical core that runs grid point `point`."""
  axis = core_axis(grid)
  if axis is None:
    return 0
  return point[axis] * CORES // grid[axis]


def _elements(ap: HbmAP) -> np.ndarray:
  offsets = np.array([ap.offset], dtype=np.int64)
  for stride, count in ap.dims:
    offsets = (offsets[:, None] + stride * np.arange(count, dtype=np.int64)[None, :]).reshape(-1)
  return offsets


def check_no_cross_core_races(instructions, tensors, lines, shared_kinds) -> None:
  """KernelError when an instruction on one core writes an HBM element of a `shared_kinds`
  tensor (outputs, scratch) that an instruction on the other core reads or writes between the
  same two core barriers (in the same epoch: a barrier orders the accesses it separates)."""
  if len({inst.core for inst in instructions}) < 2:
    return
  # (core, tensor, epoch) -> [(instruction index, element offsets, writes)]
  accesses: dict[tuple, list] = {}
  for index, inst in enumerate(instructions):
    for name, value in inst.operands.items():
      if isinstance(value, HbmAP) and tensors[value.tensor].kind in shared_kinds:
        accesses.setdefault((inst.core, value.tensor, inst.epoch), []).append(
            (index, _elements(value), name.startswith("dst")))
  for (core, tensor, epoch), mine in accesses.items():
    others = accesses.get((1 - core, tensor, epoch), [])
    if not others:
      continue
    size = int(np.prod(tensors[tensor].shape))
    written = np.zeros(size, bool)
    for _, elements, writes in mine:
      if writes:
        written[elements] = True
    for other, elements, writes in others:
      hit = elements[written[elements]]
      if hit.size:
        first = next(i for i, e, w in mine if w and np.isin(hit[0], e))
        raise kernel_error(
            f"programs on the two physical cores race on HBM tensor "
            f"{tensors[tensor].name!r}: element {int(hit[0])} is written by core {core} at "
            f"{lines[instructions[first].line]} and {'written' if writes else 'read'} by core "
            f"{1 - core} at {lines[instructions[other].line]} (the cores run concurrently; "
            "give each core's programs their own part of the tensor, or order the accesses "
            "with nisa.core_barrier)",
            lines[instructions[other].line])
