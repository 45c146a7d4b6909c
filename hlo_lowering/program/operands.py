"""Instruction operands: access patterns over HBM tensors and over SBUF/PSUM tiles, and
immediates. Each knows its element count and the memory region it touches (for the back end's
insert-semaphores stage). Their validity (dim counts, partition rules, memory bounds, tile dtypes)
is the C++ loader's to check; a tile only checks that it lies in its symbolic buffer."""

import dataclasses
import math
from typing import Sequence

from .buffers import Address
from .enums import DType, Memory


@dataclasses.dataclass(frozen=True)
class HbmAP:
  """An access pattern over one HBM tensor (elements of the tensor's dtype)."""
  tensor: int
  offset: int
  dims: tuple  # ((stride, count), ...) outermost first

  def __post_init__(self):
    object.__setattr__(self, "dims", tuple((int(s), int(c)) for s, c in self.dims))

  @classmethod
  def dense(cls, tensor: int, shape: Sequence[int], offset: int = 0) -> "HbmAP":
    """Row-major access to `shape` elements starting at `offset`."""
    shape = tuple(int(d) for d in shape) or (1,)
    dims, stride = [], 1
    for count in reversed(shape):
      dims.append((stride, count))
      stride *= count
    return cls(tensor, offset, tuple(reversed(dims)))

  @property
  def shape(self) -> tuple:
    return tuple(c for _, c in self.dims)

  @property
  def num_elements(self) -> int:
    return math.prod(self.shape)

  def moved(self, elements: int) -> "HbmAP":
    """The same pattern starting `elements` further (a loop iteration's step)."""
    return dataclasses.replace(self, offset=self.offset + int(elements))

  def element_range(self) -> tuple:
    """[first, last] element indices addressed."""
    low = self.offset + sum(s * (c - 1) for s, c in self.dims if s < 0)
    high = self.offset + sum(s * (c - 1) for s, c in self.dims if s > 0)
    return low, high


@dataclasses.dataclass(frozen=True)
class TileAP:
  """An access pattern over SBUF or PSUM: a partition range and 1..4 free dims (strides in
  elements, relative to `byte_offset` inside every partition).

  Built from an `Address` (a lowering rule's symbolic buffer), `byte_offset` is relative to
  `buffer` until the back end's plan-memory stage places the buffer; `buffer` is None once the
  offset is absolute (and always in a program read back)."""
  memory: Memory
  dtype: DType
  partition_start: int
  partition_count: int
  byte_offset: int
  free: tuple  # ((stride, count), ...) outermost first
  buffer: object = None  # buffers.Buffer | None

  def __post_init__(self):
    if isinstance(self.byte_offset, Address):
      object.__setattr__(self, "buffer", self.byte_offset.buffer)
      object.__setattr__(self, "byte_offset", self.byte_offset.offset)
    # Tiles are built by the ten thousand: convert only what is not of its type yet.
    if type(self.memory) is not Memory:
      object.__setattr__(self, "memory", Memory(self.memory))
    if type(self.dtype) is not DType:
      object.__setattr__(self, "dtype", DType(self.dtype))
    object.__setattr__(self, "free", tuple([(int(s), int(c)) for s, c in self.free]))
    if self.buffer is not None:
      if self.buffer.memory != self.memory:
        raise ValueError(f"a {self.memory.name} TileAP in {self.buffer.memory.name} buffer "
                         f"{self.buffer}: {self}")
      high = self.byte_range()[1]
      if high > self.buffer.size:
        raise ValueError(f"TileAP ends at byte {high} past the {self.buffer.size} bytes of its "
                         f"buffer {self.buffer}: {self}")

  @classmethod
  def dense(cls, memory: Memory, dtype: DType, partition_start: int, partition_count: int,
            byte_offset: int, free_shape: Sequence[int]) -> "TileAP":
    """Row-major free dims of `free_shape` elements starting at `byte_offset`."""
    dims, stride = [], 1
    for count in reversed(tuple(free_shape) or (1,)):
      dims.append((stride, int(count)))
      stride *= count
    return cls(memory, dtype, partition_start, partition_count, byte_offset,
               tuple(reversed(dims)))

  @property
  def address(self):
    """Where the tile starts: an `Address` in its buffer, or the absolute byte offset."""
    return self.byte_offset if self.buffer is None else Address(self.buffer, self.byte_offset)

  @property
  def free_shape(self) -> tuple:
    return tuple(c for _, c in self.free)

  @property
  def free_size(self) -> int:
    return math.prod(self.free_shape)

  @property
  def shape(self) -> tuple:
    return (self.partition_count,) + self.free_shape

  @property
  def num_elements(self) -> int:
    return self.partition_count * self.free_size

  def byte_range(self) -> tuple:
    """[low, high) bytes addressed inside each partition."""
    # Kept once computed (the fields are frozen): the back end asks for it per access.
    known = self.__dict__.get("_byte_range")
    if known is not None:
      return known
    low = high = 0
    for s, c in self.free:
      if s > 0:
        high += s * (c - 1)
      else:
        low += s * (c - 1)
    size = self.dtype.itemsize
    known = (self.byte_offset + low * size, self.byte_offset + (high + 1) * size)
    self.__dict__["_byte_range"] = known
    return known



@dataclasses.dataclass(frozen=True)
class Scalar:
  """An immediate: stored as f64 for float dtypes, as a 64-bit integer otherwise."""
  dtype: DType
  value: float

  def __post_init__(self):
    object.__setattr__(self, "dtype", DType(self.dtype))
    if self.dtype.is_float:
      object.__setattr__(self, "value", float(self.value))
    else:
      value = int(self.value)
      if self.dtype == DType.U64:
        if not 0 <= value < 2**64:
          raise ValueError(f"u64 immediate {value} out of range")
      elif not -2**63 <= value < 2**63:
        raise ValueError(f"{self.dtype.name} immediate {value} out of range")
      object.__setattr__(self, "value", value)
