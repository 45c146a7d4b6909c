"""Which elements of each on-chip tile the kernel has written so far, so that an instruction
reading an element nothing wrote (uninitialised SBUF/PSUM: garbage on a chip, whatever a
previous tile left there) is refused at the kernel line that reads it, as AWS's simulator
shows it with NaN-filled fresh tiles."""

from __future__ import annotations

import numpy as np

from hlo_lowering.program import TileAP
from jax_trn.nki.tensors import Allocation

# Operands an instruction writes; every other tile operand is read (a matmul that continues an
# accumulation group also reads its dst, which its group's first matmul wrote).
WRITTEN_OPERANDS = frozenset({"dst", "dst_sum"})


def _elements(tile: TileAP) -> np.ndarray:
  """The element offsets (inside every partition of its allocation) a tile addresses."""
  offsets = np.array([tile.byte_offset // tile.dtype.itemsize], dtype=np.int64)
  for stride, count in tile.free:
    offsets = (offsets[:, None] + stride * np.arange(count, dtype=np.int64)[None, :]).reshape(-1)
  return offsets


class WrittenElements:
  def __init__(self):
    self._masks: dict[int, np.ndarray] = {}
    self._complete: set[int] = set()  # allocations every element of which is written

  def _mask(self, allocation: Allocation, tile: TileAP) -> np.ndarray:
    mask = self._masks.get(allocation.id)
    if mask is None:
      elements = allocation.size // tile.dtype.itemsize
      mask = self._masks[allocation.id] = np.zeros((allocation.partitions, elements), bool)
    return mask

  def first_unwritten(self, allocation: Allocation, tile: TileAP):
    """(partition, element) of the first element `tile` reads that nothing wrote, or None."""
    if allocation.id in self._complete:
      return None
    mask = self._mask(allocation, tile)
    rows = mask[tile.partition_start:tile.partition_start + tile.partition_count]
    missing = ~rows[:, _elements(tile)]
    if not missing.any():
      return None
    p, i = np.argwhere(missing)[0]
    return int(p) + tile.partition_start, int(i)

  def mark(self, allocation: Allocation, tile: TileAP) -> None:
    if allocation.id in self._complete:
      return
    mask = self._mask(allocation, tile)
    mask[tile.partition_start:tile.partition_start + tile.partition_count, _elements(tile)] = True
    if mask.all():
      self._complete.add(allocation.id)
      del self._masks[allocation.id]
