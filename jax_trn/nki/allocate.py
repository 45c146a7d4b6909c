"""The kernel's on-chip allocator: gives every SBUF/PSUM tile an address in the kernel's arenas
once tracing is done, by liveness (from the first to the last instruction that touches it), as
the NKI compiler's allocator does.

SBUF: byte ranges per partition, next-fit from where the last tile went, so consecutive tiles
land apart and a loop's next DMA overlaps this iteration's compute (the back end's semaphores
order any reuse). PSUM: whole 2 KiB banks (a matmul group writes one bank), at most the
target's 8 live at once. A kernel whose live tiles do not fit gets a KernelError at the line
that created the tile that did not fit.
"""

from __future__ import annotations

from hlo_lowering.program import TileAP
from jax_trn.nki.errors import kernel_error
from jax_trn.nki.tensors import SBUF, Allocation

SBUF_ALIGNMENT = 64


def _live_ranges(instructions) -> dict[int, tuple[int, int]]:
  ranges: dict[int, tuple[int, int]] = {}
  for index, inst in enumerate(instructions):
    for value in inst.operands.values():
      if isinstance(value, TileAP) and value.buffer is not None:
        first = ranges.get(value.buffer.id, (index, index))[0]
        ranges[value.buffer.id] = (first, index)
  return ranges


class _Arena:
  """Units [0, capacity) with next-fit placement of live ranges."""

  def __init__(self, capacity: int):
    self.capacity = capacity
    self.live: list[tuple[int, int, int]] = []  # (low, high, last instruction)
    self.cursor = 0
    self.high_water = 0

  def release_before(self, index: int) -> None:
    self.live = [r for r in self.live if r[2] >= index]

  def held(self) -> int:
    return sum(high - low for low, high, _ in self.live)

  def take(self, size: int, last: int) -> int | None:
    for start in (self.cursor, 0):
      address = self._first_fit(start, size)
      if address is not None:
        self.live.append((address, address + size, last))
        self.cursor = address + size
        self.high_water = max(self.high_water, address + size)
        return address
    return None

  def _first_fit(self, start: int, size: int) -> int | None:
    address = start
    for low, high, _ in sorted(self.live):
      if high <= address:
        continue
      if low >= address + size:
        break
      address = high
    return address if address + size <= self.capacity else None


def place(allocations: list[Allocation], instructions, spec: dict) -> tuple[dict, int, int]:
  """{allocation id: byte offset in its arena}, and the SBUF and PSUM arena sizes."""
  bank = int(spec["psum_bank_bytes"])
  arenas = {SBUF: _Arena(int(spec["sbuf_bytes_per_partition"]) // SBUF_ALIGNMENT),
            "psum": _Arena(int(spec["psum_banks"]))}
  ranges = _live_ranges(instructions)
  addresses: dict[int, int] = {}
  for allocation in sorted((a for a in allocations if a.id in ranges),
                           key=lambda a: ranges[a.id][0]):
    first, last = ranges[allocation.id]
    unit = SBUF_ALIGNMENT if allocation.memory == SBUF else bank
    arena = arenas[allocation.memory]
    arena.release_before(first)
    units = -(-allocation.size // unit)
    slot = arena.take(units, last)
    if slot is None:
      held = arena.held() * unit
      capacity = arena.capacity * unit
      what = ("SBUF" if allocation.memory == SBUF else
              f"PSUM ({arena.capacity} banks of {bank} bytes)")
      raise kernel_error(
          f"{what} is full: tile {allocation.description} needs {allocation.size} bytes per "
          f"partition while other live tiles hold {held} of the {capacity} bytes per partition "
          f"of {spec['name']} (free tiles sooner, or make them smaller)", allocation.position)
    addresses[allocation.id] = slot * unit
  return (addresses, arenas[SBUF].high_water * SBUF_ALIGNMENT,
          arenas["psum"].high_water * bank)
