"""plan-memory: places every symbolic SBUF/PSUM buffer and proves the placement sound.

Requires: lowering done. Tiles are in symbolic buffers (`TileAP.buffer`, taken by the rules
through the LoweringContext's allocators) or at absolute offsets (hand-written programs).
Ensures: no tile refers to a buffer (every `byte_offset` is absolute); every buffer and every
tile lies inside its memory per partition (the target's `sbuf_bytes_per_partition`, or
`psum_banks` × `psum_bank_bytes`); no two buffers of one memory that are live at the same time
overlap; the compile report holds the peak SBUF and PSUM bytes per partition held by live
buffers.

Placement (the policy lowering was tuned against; a better one changes this file only): buffers
in the order the rules took them. Slot buffers of a memory rotate through its slots (slot size:
the buffer's size), so consecutive takes land in different slots and the DMA of the next tile
overlaps the compute of this one. An arena buffer covers every slot from byte 0 and leaves the
rotation where it was (as taking every slot once would).

Liveness: a buffer is live from the first to the last instruction that touches it, in program
order (the order lowering emitted them, across blocks). That is the whole story because no buffer
outlives the rule that took it: values pass between ops through HBM, so a loop's back edge never
carries a buffer's contents.
"""

from __future__ import annotations

import dataclasses

from hlo_lowering.program import Memory, ProgramBuilder, TileAP
from hlo_lowering.program.buffers import ARENA, Buffer
from hlo_lowering.report import CompileReport


class MemoryPlanError(ValueError):
  """The buffers do not fit, or two live buffers overlap: a compiler bug in a lowering rule."""


def capacity(memory: Memory, target_spec: dict) -> int:
  """Bytes per partition of SBUF or PSUM on the target."""
  if memory == Memory.SBUF:
    return int(target_spec["sbuf_bytes_per_partition"])
  return int(target_spec["psum_banks"]) * int(target_spec["psum_bank_bytes"])


def _place(buffers: list[Buffer], target_spec: dict) -> dict[Buffer, int]:
  addresses, next_slot = {}, {}
  for buffer in buffers:
    if buffer.placement == ARENA:
      addresses[buffer] = 0
      continue
    slots = capacity(buffer.memory, target_spec) // buffer.size
    if slots == 0:
      raise MemoryPlanError(f"plan-memory: buffer {buffer} of {buffer.size} bytes exceeds the "
                            f"{capacity(buffer.memory, target_spec)} bytes per partition of "
                            f"{buffer.memory.name}")
    slot = next_slot.get(buffer.memory, 0)
    addresses[buffer] = slot * buffer.size
    next_slot[buffer.memory] = (slot + 1) % slots
  return addresses


def _tiles(operands: dict):
  for name, value in operands.items():
    if isinstance(value, TileAP):
      yield name, value


def _live_ranges(builder: ProgramBuilder) -> dict[Buffer, tuple[int, int]]:
  ranges: dict[Buffer, tuple[int, int]] = {}
  for index, inst in enumerate(builder.instructions):
    for _, tile in _tiles(inst.operands):
      if tile.buffer is not None:
        first = ranges.get(tile.buffer, (index, index))[0]
        ranges[tile.buffer] = (first, index)
  return ranges


def _check_overlaps(ranges: dict[Buffer, tuple[int, int]], addresses: dict[Buffer, int]) -> None:
  live: list[Buffer] = []
  for buffer in sorted(ranges, key=lambda b: ranges[b][0]):
    first = ranges[buffer][0]
    live = [b for b in live if ranges[b][1] >= first]
    low, high = addresses[buffer], addresses[buffer] + buffer.size
    for other in live:
      if (other.memory == buffer.memory and addresses[other] < high
          and low < addresses[other] + other.size):
        other_low = addresses[other]
        raise MemoryPlanError(
            f"plan-memory: buffers {other} (bytes {other_low}..{other_low + other.size}, "
            f"instructions {ranges[other][0]}..{ranges[other][1]}) and {buffer} (bytes "
            f"{low}..{high}, instructions {first}..{ranges[buffer][1]}) overlap while both live")
    live.append(buffer)


def _peaks(ranges: dict[Buffer, tuple[int, int]]) -> dict[Memory, int]:
  events = sorted((at, delta, b.memory) for b, (first, last) in ranges.items()
                  for at, delta in ((first, b.size), (last + 1, -b.size)))
  held = {Memory.SBUF: 0, Memory.PSUM: 0}
  peaks = dict(held)
  for _, delta, memory in events:  # at equal positions, releases (negative) come first
    held[memory] += delta
    peaks[memory] = max(peaks[memory], held[memory])
  return peaks


def _placed(tile, addresses: dict, target_spec: dict):
  """`tile` at its absolute offset (itself when it already is absolute), checked against its
  memory's capacity."""
  if tile.buffer is not None:
    tile = dataclasses.replace(tile, byte_offset=addresses[tile.buffer] + tile.byte_offset,
                               buffer=None)
  high = tile.byte_range()[1]
  if high > capacity(tile.memory, target_spec):
    raise MemoryPlanError(f"plan-memory: {tile} ends at byte {high}, past the "
                          f"{capacity(tile.memory, target_spec)} bytes per partition of "
                          f"{tile.memory.name}")
  return tile


def run(builder: ProgramBuilder, target_spec: dict, report: CompileReport) -> None:
  addresses = _place(builder.buffers, target_spec)
  for buffer, address in addresses.items():
    if address + buffer.size > capacity(buffer.memory, target_spec):
      raise MemoryPlanError(f"plan-memory: buffer {buffer} ({buffer.size} bytes at {address}) "
                            f"exceeds the {capacity(buffer.memory, target_spec)} bytes per "
                            f"partition of {buffer.memory.name}")
  ranges = _live_ranges(builder)
  _check_overlaps(ranges, addresses)
  # Equal tiles recur across instructions (a loop's body, a buffer read by many ops): each
  # distinct one is placed and checked once.
  placed = {}
  for inst in builder.instructions:
    for name, tile in list(_tiles(inst.operands)):
      absolute = placed.get(tile)
      if absolute is None:
        absolute = placed[tile] = _placed(tile, addresses, target_spec)
      if absolute is not tile:
        inst.operands[name] = absolute
  builder.memory_plan = {b: (addresses[b], first, last) for b, (first, last) in ranges.items()}
  peaks = _peaks(ranges)
  report.sbuf_peak_bytes = peaks[Memory.SBUF]
  report.psum_peak_bytes = peaks[Memory.PSUM]
