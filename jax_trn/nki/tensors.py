"""NkiTensor: what a kernel holds while it is traced: a view (offset, shape, strides) of an HBM
tensor of the kernel or of an on-chip tile (SBUF/PSUM), turned into the program's access
patterns (HbmAP / TileAP) when an instruction uses it.

Dim 0 of an on-chip tensor is the partition dim (at most 128 partitions, no striding across
them); its other dims are free dims, row-major inside every partition. Slicing with ints,
slices (positive steps), Ellipsis and Beta 1 index expressions (index_expr.py: each the slice
it spans) gives views without moving data, as in NKI.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from hlo_lowering.lowering.places import collapse_dims, row_major_strides
from hlo_lowering.program import DType, HbmAP, Memory, TileAP
from hlo_lowering.program.buffers import SLOT, Buffer
from jax_trn.nki.errors import kernel_error
from jax_trn.nki.index_expr import IndexExpr

HBM, SBUF, PSUM = "hbm", "sbuf", "psum"
MAX_TILE_FREE_DIMS = 4
MAX_HBM_DIMS = 8


@dataclasses.dataclass(eq=False)
class Allocation:
  """One on-chip tensor's storage: `size` bytes in each of `partitions` partitions, placed by
  the tracer's allocator after tracing (allocate.py). `buffer` stands for it in TileAPs."""
  id: int
  memory: str        # SBUF | PSUM
  partitions: int
  size: int          # bytes per partition
  position: str      # the kernel line that created it
  description: str   # "(128, 512) float32"

  def __post_init__(self):
    memory = Memory.SBUF if self.memory == SBUF else Memory.PSUM
    self.buffer = Buffer(self.id, memory, self.size, SLOT)


def _dtype(dtype) -> np.dtype:
  return np.dtype(dtype)


class NkiTensor:
  """A kernel tensor or a view of one. `storage` is an HBM kernel tensor index (HBM) or an
  Allocation (SBUF/PSUM); `offset` counts elements (for tiles: inside every partition, after
  `partition_offset` partitions)."""

  def __init__(self, buffer: str, shape, dtype, storage, offset: int = 0, strides=None,
               partition_offset: int = 0, name: str = ""):
    self.buffer = buffer
    self.shape = tuple(int(d) for d in shape)
    self.dtype = _dtype(dtype)
    self.storage = storage
    self.offset = int(offset)
    self.partition_offset = int(partition_offset)
    self.name = name
    if strides is None:
      strides = row_major_strides(self.shape if buffer == HBM else self.shape[1:])
      if buffer != HBM:
        strides = (1,) + tuple(strides)
    self.strides = tuple(int(s) for s in strides)
    self._tile_ap = None  # made once: a view never changes

  # --- what NKI users read ------------------------------------------------------------------

  @property
  def ndim(self) -> int:
    return len(self.shape)

  @property
  def size(self) -> int:
    return math.prod(self.shape)

  @property
  def itemsize(self) -> int:
    return self.dtype.itemsize

  @property
  def on_chip(self) -> bool:
    return self.buffer != HBM

  def __repr__(self) -> str:
    return f"NkiTensor({self.buffer}, {self.shape}, {self.dtype})"

  def describe(self) -> str:
    return f"{self.buffer} {self.shape} {self.dtype}"

  # --- views --------------------------------------------------------------------------------

  def _view(self, shape, strides, offset, partition_offset) -> "NkiTensor":
    return NkiTensor(self.buffer, shape, self.dtype, self.storage, offset, strides,
                     partition_offset, self.name)

  def __getitem__(self, key) -> "NkiTensor":
    if not isinstance(key, tuple):
      key = (key,)
    if any(k is Ellipsis for k in key):
      at = next(i for i, k in enumerate(key) if k is Ellipsis)
      fill = (slice(None),) * (self.ndim - len(key) + 1)
      key = key[:at] + fill + key[at + 1:]
    if len(key) > self.ndim:
      raise kernel_error(f"{len(key)} indices for a {self.ndim}-d tensor {self.describe()}")
    key = key + (slice(None),) * (self.ndim - len(key))
    exprs = [i for i, k in enumerate(key) if isinstance(k, IndexExpr)]
    key = tuple(k.as_slice(exprs.index(i), len(exprs)) if i in exprs else k
                for i, k in enumerate(key))
    shape, strides, offset, partition_offset = [], [], self.offset, self.partition_offset
    for dim, (k, n, stride) in enumerate(zip(key, self.shape, self.strides)):
      partition = self.on_chip and dim == 0
      if isinstance(k, (int, np.integer)) and not isinstance(k, bool):
        k = int(k) + n if k < 0 else int(k)
        if not 0 <= k < n:
          raise kernel_error(f"index {k} is out of bounds for dim {dim} of size {n} of "
                             f"{self.describe()}")
        if partition:  # a tile keeps its partition dim (one partition)
          partition_offset += k
          shape.append(1)
          strides.append(1)
        else:
          offset += k * stride
        continue
      if not isinstance(k, slice):
        raise kernel_error(f"index {k!r} of dim {dim}: index tensors with ints, slices or "
                           "nl.arange / nl.mgrid index expressions")
      start, stop, step = k.indices(n)
      if step <= 0:
        raise kernel_error(f"slice step {step} of dim {dim}: only positive steps are supported")
      if k.stop is not None and not -n <= k.stop <= n:
        raise kernel_error(f"slice {k.start}:{k.stop} is out of bounds for dim {dim} of size "
                           f"{n} of {self.describe()}")
      count = len(range(start, stop, step))
      if partition:
        if step != 1:
          raise kernel_error(f"slice step {step} on the partition dim: a tile has no striding "
                             "across partitions")
        partition_offset += start
      else:
        offset += start * stride
      shape.append(count)
      strides.append(stride * step)
    return self._view(shape, strides, offset, partition_offset)

  def reshape(self, shape) -> "NkiTensor":
    """A dense tensor viewed with another shape of the same size (HBM tensors and the free dims
    of a tile, whose partition dim stays)."""
    shape = tuple(int(d) for d in shape)
    if math.prod(shape) != self.size:
      raise kernel_error(f"cannot reshape {self.describe()} to {shape}")
    dense = row_major_strides(self.shape[self.on_chip:])
    if tuple(self.strides[self.on_chip:]) != tuple(dense):
      raise kernel_error(f"reshape of a strided view {self.describe()}: copy it first")
    if self.on_chip:
      if shape[0] != self.shape[0]:
        raise kernel_error(f"reshape of tile {self.describe()} to {shape} changes its partition dim")
      return self._view(shape, (1,) + row_major_strides(shape[1:]), self.offset,
                        self.partition_offset)
    return self._view(shape, row_major_strides(shape), self.offset, 0)

  @property
  def T(self) -> "NkiTensor":  # noqa: N802 (NumPy's name)
    """A 2-d HBM tensor transposed (a strided view: a DMA reads it column by column)."""
    if self.on_chip or self.ndim != 2:
      raise kernel_error(f".T of {self.describe()}: only 2-d HBM tensors are transposed by view "
                         "(use nisa.nc_transpose for tiles)")
    return self._view(self.shape[::-1], self.strides[::-1], self.offset, 0)

  def broadcast_to(self, shape) -> "NkiTensor":
    """An HBM view repeating its size-1 dims (stride 0), e.g. a [1, H] row to [128, H]: a DMA
    replicates it (engines never read across partitions)."""
    shape = tuple(int(d) for d in shape)
    if self.on_chip:
      raise kernel_error(f"broadcast_to of tile {self.describe()}: broadcast the HBM tensor "
                         "while loading it")
    if len(shape) != self.ndim or any(n != m and n != 1 for n, m in zip(self.shape, shape)):
      raise kernel_error(f"cannot broadcast {self.describe()} to {shape} (same rank; only size-1 "
                         "dims grow)")
    strides = tuple(0 if n != m else s for n, m, s in zip(self.shape, shape, self.strides))
    return self._view(shape, strides, self.offset, 0)

  # --- access patterns ----------------------------------------------------------------------

  def hbm_ap(self) -> HbmAP:
    if self.on_chip:
      raise kernel_error(f"{self.describe()} is not in HBM")
    shape, (strides,) = collapse_dims(self.shape, self.strides)
    if len(shape) > MAX_HBM_DIMS:
      raise kernel_error(f"{self.describe()} needs {len(shape)} access-pattern dims; a DMA "
                         f"addresses at most {MAX_HBM_DIMS}")
    return HbmAP(self.storage, self.offset, tuple(zip(strides, shape)))

  def tile_ap(self) -> TileAP:
    if self._tile_ap is None:
      self._tile_ap = self._make_tile_ap()
    return self._tile_ap

  def _make_tile_ap(self) -> TileAP:
    if not self.on_chip:
      raise kernel_error(f"{self.describe()} is in HBM: engines read SBUF/PSUM tiles "
                         "(copy it in with nisa.dma_copy / nl.load)")
    free_shape, (free_strides,) = collapse_dims(self.shape[1:], self.strides[1:])
    if len(free_shape) > MAX_TILE_FREE_DIMS:
      raise kernel_error(f"{self.describe()} needs {len(free_shape)} free access-pattern dims; "
                         f"a tile has at most {MAX_TILE_FREE_DIMS}")
    allocation: Allocation = self.storage
    memory = Memory.SBUF if self.buffer == SBUF else Memory.PSUM
    return TileAP(memory, DType.from_numpy(self.dtype), self.partition_offset, self.shape[0],
                  self.offset * self.itemsize, tuple(zip(free_strides, free_shape)),
                  allocation.buffer)

  def ap(self):
    return self.tile_ap() if self.on_chip else self.hbm_ap()

  @property
  def free_size(self) -> int:
    """Elements per partition (on-chip tensors)."""
    return math.prod(self.shape[1:])
