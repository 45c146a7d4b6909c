"""On-chip memory allocators for one compilation: SBUF slots, PSUM banks, DMA queues.

All three rotate. The program builder derives every wait from the memory an instruction touches,
so reusing a slot is always correct; rotating through several slots is what lets the DMA of the
next tile overlap the compute of this one (double-buffering) instead of waiting on it.
"""

from __future__ import annotations

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
  """The target's PSUM banks (`count` of `bank_bytes` per partition), handed out in rotation
  (one per matmul group)."""

  def __init__(self, bank_bytes: int, count: int):
    self.bank_bytes, self.count = bank_bytes, count
    self._next = 0

  def take(self) -> int:
    offset = self._next * self.bank_bytes
    self._next = (self._next + 1) % self.count
    return offset


class DmaQueues:
  """Round-robin selection among the target's `count` DMA queues, so independent transfers run
  on different queues."""

  def __init__(self, count: int):
    self.count = count
    self._next = 0

  def take(self) -> int:
    queue = self._next
    self._next = (self._next + 1) % self.count
    return queue
