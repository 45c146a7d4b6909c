"""On-chip memory allocators for one compilation: SBUF slots, PSUM banks, DMA queues.

All three rotate. The program builder derives every wait from the memory an instruction touches,
so reusing a slot is always correct; rotating through several slots is what lets the DMA of the
next tile overlap the compute of this one (double-buffering) instead of waiting on it.
"""

from __future__ import annotations

from hlo_lowering.program.enums import NUM_DMA_QUEUES, PSUM_BANK_BYTES, PSUM_BANKS

SBUF_SLOT_BYTES = 16 * 1024


class SbufSlots:
  """SBUF split into `count` equal slots of `slot_bytes` per partition, handed out in rotation.

  A rule may hold at most `count` slots live at once: `take()` returns the least recently taken
  slot, so `count` consecutive takes are distinct.
  """

  def __init__(self, bytes_per_partition: int, slot_bytes: int = SBUF_SLOT_BYTES):
    self.slot_bytes = slot_bytes
    self.count = bytes_per_partition // slot_bytes
    if self.count < 4:
      raise ValueError(f"SBUF of {bytes_per_partition} bytes per partition holds fewer than 4 "
                       f"slots of {slot_bytes}")
    self._next = 0

  def take(self) -> int:
    """Byte offset (in every partition) of the next slot."""
    offset = self._next * self.slot_bytes
    self._next = (self._next + 1) % self.count
    return offset


class PsumBanks:
  """The 8 PSUM banks of 2 KiB per partition, handed out in rotation (one per matmul group)."""

  bank_bytes = PSUM_BANK_BYTES
  count = PSUM_BANKS

  def __init__(self):
    self._next = 0

  def take(self) -> int:
    offset = self._next * PSUM_BANK_BYTES
    self._next = (self._next + 1) % PSUM_BANKS
    return offset


class DmaQueues:
  """Round-robin DMA queue selection, so independent transfers run on different queues."""

  count = NUM_DMA_QUEUES

  def __init__(self):
    self._next = 0

  def take(self) -> int:
    queue = self._next
    self._next = (self._next + 1) % NUM_DMA_QUEUES
    return queue
