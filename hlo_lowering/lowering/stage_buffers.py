"""SBUF buffers of a software-pipelined tile loop (elementwise.py): one ring per tile value, as
deep as the pipeline stages the value lives across (modulo variable expansion).

Slot s of the pipeline (row_engines.run_pipelined) runs stage k of tile s − k. A value that
stage a of tile t writes and stage b last reads is needed until slot t + b, so the tile that next
writes its buffer, t + depth in slot t + depth + a, must come after it: depth ≥ b − a + 1. A
value one DMA loads gets one buffer more, so the next tile's load can run a slot ahead of its
first reader instead of stalling it, and a stored value at least two, so its store has a slot to
finish before the buffer is written again. Depths are rounded up to powers of two, so every
ring comes back to its first buffer after the deepest ring's depth (`period`): tile t takes
buffer t mod depth, the same buffers in every iteration of a loop whose body is a whole number
of periods (tile_loops.py). Any other conflict between tiles sharing a buffer is ordered by
insert-semaphores, so the depths decide speed only, never results.

A GELU forward-and-backward tile (24 bf16 values, 8 engine changes: 8 tiles in flight) takes 68
buffers this way, where a buffer per value for each tile in flight would take 192.
"""

from __future__ import annotations

from typing import Hashable, NamedTuple

from hlo_lowering.lowering.allocators import SbufSlots
from hlo_lowering.program import DType, Memory, TileAP

ALIGN = 64  # bytes per partition: every buffer starts on this boundary


class Lifetime(NamedTuple):
  """A tile value's stages: written in `first`, last read in `last`."""
  first: int
  last: int
  loaded: bool   # its writer is a DMA from HBM
  stored: bool   # a DMA to HBM reads it
  per_row: bool  # one element per partition ([P, 1]), not a whole tile
  dtype: DType

  @property
  def depth(self) -> int:
    span = self.last - self.first + 1 + self.loaded
    if self.stored:
      span = max(span, 2)
    return 1 << (span - 1).bit_length()


def _aligned(n: int) -> int:
  return -(-n // ALIGN) * ALIGN


class StageBuffers:
  """Rings for `lifetimes` ({key: Lifetime}) with tiles of `max_free` elements per partition (at
  most `cap_free`; 0 when not even one element per partition fits), sized against `sbuf`'s
  slots; `take()` then takes them.

  Where the rings fit in half of SBUF's slots with tiles of at least `good_free` elements (or
  as large as all of SBUF would allow), they take whole slots (allocators.SbufSlots.take), so
  the next rule's tiles land in other slots and its loads overlap this rule's last tiles, as
  the rotation of one-slot buffers does for every rule; otherwise they share one arena of all
  of SBUF, with the largest tiles it holds."""

  def __init__(self, sbuf: SbufSlots, lifetimes: dict[Hashable, Lifetime], cap_free: int,
               good_free: int):
    self.lifetimes = lifetimes
    self.period = max((l.depth for l in lifetimes.values()), default=1)
    self._sbuf = sbuf
    in_slots = _largest(self._fits_half_the_slots, cap_free)
    in_arena = _largest(lambda free: self._bytes(free) <= sbuf.arena_bytes, cap_free)
    self._whole_slots = in_slots >= min(good_free, in_arena)
    self.max_free = in_slots if self._whole_slots else in_arena
    self._place = {}

  def take(self) -> None:
    """Takes the SBUF buffers the rings lie in."""
    size = lambda buffer: self._slot_bytes(self.lifetimes[buffer[0]], self.max_free)
    if self._whole_slots:
      for members in self._packed(self.max_free):
        address = self._sbuf.take()
        for buffer in members:
          self._place[buffer] = address
          address += size(buffer)
    else:
      address = self._sbuf.take_arena()
      for buffer in self._buffers():
        self._place[buffer] = address
        address += size(buffer)

  def _fits_half_the_slots(self, free: int) -> bool:
    packed = self._packed(free)
    return packed is not None and len(packed) <= self._sbuf.count // 2

  def _buffers(self) -> list[tuple[Hashable, int]]:
    return [(key, i) for key, l in self.lifetimes.items() for i in range(l.depth)]

  @staticmethod
  def _slot_bytes(l: Lifetime, free: int) -> int:
    return _aligned(l.dtype.itemsize * (1 if l.per_row else free))

  def _bytes(self, free: int) -> int:
    return sum(self._slot_bytes(self.lifetimes[key], free) for key, _ in self._buffers())

  def _packed(self, free: int) -> list[list[tuple[Hashable, int]]] | None:
    """The buffers packed first-fit, largest first, into SBUF slots; None if one is larger
    than a slot."""
    slot_bytes = self._sbuf.slot_bytes
    size = lambda buffer: self._slot_bytes(self.lifetimes[buffer[0]], free)
    bins, room = [], []
    for buffer in sorted(self._buffers(), key=size, reverse=True):
      if size(buffer) > slot_bytes:
        return None
      fit = next((j for j, r in enumerate(room) if r >= size(buffer)), None)
      if fit is None:
        bins.append([])
        room.append(slot_bytes)
        fit = len(bins) - 1
      bins[fit].append(buffer)
      room[fit] -= size(buffer)
    return bins

  def tile(self, key: Hashable, index: int, partitions: int, free: int) -> TileAP:
    """Value `key`'s buffer for tile `index`, `partitions` × `free` elements (a per-row value:
    × 1)."""
    l = self.lifetimes[key]
    return TileAP.dense(Memory.SBUF, l.dtype, 0, partitions, self._place[(key, index % l.depth)],
                        (1 if l.per_row else free,))


def _largest(fits, cap: int) -> int:
  """The largest n in [1, cap] with fits(n) (monotone: fits(n) implies fits(m) for m < n), or 0."""
  lo, hi = 0, cap
  while lo < hi:
    mid = (lo + hi + 1) // 2
    if fits(mid):
      lo = mid
    else:
      hi = mid - 1
  return lo
