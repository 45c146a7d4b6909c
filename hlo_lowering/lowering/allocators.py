"""On-chip buffers for the lowering rules of one compilation: SBUF slots and PSUM banks.

A rule takes symbolic buffers (`Address`es at offset 0 of a new `Buffer`) and addresses its tiles
relative to them; the back end's plan-memory stage (hlo_lowering/backend/plan_memory.py) decides
where each buffer lives and proves that no two live buffers overlap. The sizes here are what a
rule may plan with: `count` consecutive takes are distinct buffers that can all be live at once.
"""

from __future__ import annotations

from hlo_lowering.program import Memory, ProgramBuilder
from hlo_lowering.program.buffers import ARENA, SLOT, Address

SBUF_SLOT_BYTES = 16 * 1024


class SbufSlots:
  """SBUF as `count` equal slots of `slot_bytes` per partition: `take()` one slot, or
  `take_arena()` all of them as one buffer of `arena_bytes`."""

  def __init__(self, builder: ProgramBuilder, bytes_per_partition: int,
               slot_bytes: int = SBUF_SLOT_BYTES):
    self._builder = builder
    self.slot_bytes = slot_bytes
    self.count = bytes_per_partition // slot_bytes
    if self.count < 4:
      raise ValueError(f"SBUF of {bytes_per_partition} bytes per partition holds fewer than 4 "
                       f"slots of {slot_bytes}")
    self.arena_bytes = self.count * slot_bytes

  def take(self) -> Address:
    """A buffer of one slot."""
    return Address(self._builder.new_buffer(Memory.SBUF, self.slot_bytes, SLOT))

  def take_arena(self) -> Address:
    """One buffer of every slot, for a rule that carves SBUF into its own rings."""
    return Address(self._builder.new_buffer(Memory.SBUF, self.arena_bytes, ARENA))


class PsumBanks:
  """The PSUM banks (`count` of `bank_bytes` per partition): `take()` one, for one matmul group;
  `count` consecutive takes are distinct banks."""

  def __init__(self, builder: ProgramBuilder, target_spec: dict):
    self._builder = builder
    self.bank_bytes = int(target_spec["psum_bank_bytes"])
    self.count = int(target_spec["psum_banks"])

  def take(self) -> Address:
    return Address(self._builder.new_buffer(Memory.PSUM, self.bank_bytes, SLOT))

  def take_all(self) -> list[Address]:
    """Every bank, as one buffer from byte 0: bank i + 1 follows bank i, so a tile may span
    consecutive banks."""
    arena = Address(self._builder.new_buffer(Memory.PSUM, self.count * self.bank_bytes, ARENA))
    return [arena + i * self.bank_bytes for i in range(self.count)]
