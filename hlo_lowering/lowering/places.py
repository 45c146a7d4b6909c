"""Place: where an IR value's elements live in HBM, as an affine view over one tensor.

`element[i0, i1, ...]` of the value is `tensor[offset + Σ i_k · strides[k]]`. A dense place has
row-major strides; views give the others without moving data: a broadcast has stride 0 on the new
dims, a transpose permutes strides, a slice offsets and scales them, a reverse negates them.
Rules turn places into HbmAPs for instructions (`ap`) or into per-tile patterns (tiling.py).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

from hlo_lowering.program import DType, HbmAP

MAX_HBM_DIMS = 8


def row_major_strides(shape: Sequence[int]) -> tuple[int, ...]:
  strides, step = [], 1
  for count in reversed(shape):
    strides.append(step)
    step *= count
  return tuple(reversed(strides))


def collapse_dims(shape: Sequence[int], *stride_lists: Sequence[int]):
  """Drops size-1 dims and merges neighbours that are contiguous in every stride list.

  Returns (shape, [strides, ...]) with at least one dim; element order is unchanged, so the
  result addresses the same elements in the same order as the input.
  """
  dims = [(count, [s[i] for s in stride_lists]) for i, count in enumerate(shape) if count != 1]
  merged: list[tuple[int, list[int]]] = []
  for count, strides in dims:
    if merged:
      outer_count, outer_strides = merged[-1]
      if all(o == s * count for o, s in zip(outer_strides, strides)):
        merged[-1] = (outer_count * count, strides)
        continue
    merged.append((count, strides))
  if not merged:
    merged = [(1, [1] * len(stride_lists))]
  new_shape = tuple(c for c, _ in merged)
  return new_shape, [tuple(strides[k] for _, strides in merged) for k in range(len(stride_lists))]


@dataclasses.dataclass(frozen=True)
class Place:
  tensor: int
  offset: int
  shape: tuple[int, ...]
  strides: tuple[int, ...]
  dtype: DType

  @classmethod
  def dense(cls, tensor: int, shape: Sequence[int], dtype: DType, offset: int = 0) -> "Place":
    shape = tuple(shape)
    return cls(tensor, offset, shape, row_major_strides(shape), dtype)

  @property
  def size(self) -> int:
    return math.prod(self.shape)

  @property
  def is_dense(self) -> bool:
    """Row-major and contiguous (what a parameter, an output or a reshape needs)."""
    if self.size <= 1:
      return True
    _, (strides,) = collapse_dims(self.shape, self.strides)
    return strides == (1,)

  def ap(self) -> HbmAP:
    """The HbmAP enumerating this place's elements row-major, with its own dims (0-d → 1 dim)."""
    if not self.shape:
      return HbmAP(self.tensor, self.offset, ((1, 1),))
    if len(self.shape) > MAX_HBM_DIMS:
      return self.collapsed_ap()
    return HbmAP(self.tensor, self.offset, tuple(zip(self.strides, self.shape)))

  def collapsed_ap(self) -> HbmAP:
    """Like `ap` but with dims merged where contiguous: fewer, longer dims, same order."""
    shape, (strides,) = collapse_dims(self.shape, self.strides)
    if len(shape) > MAX_HBM_DIMS:
      raise ValueError(f"{self} needs {len(shape)} access-pattern dims; HBM allows "
                       f"{MAX_HBM_DIMS}")
    return HbmAP(self.tensor, self.offset, tuple(zip(strides, shape)))

  # --- views (no data moves) ----------------------------------------------------------------

  def reshaped(self, shape: Sequence[int]) -> "Place":
    if not self.is_dense:
      raise ValueError(f"reshape of a non-dense place {self}")
    return Place.dense(self.tensor, shape, self.dtype, self.offset)

  def broadcast(self, shape: Sequence[int], dims: Sequence[int]) -> "Place":
    """stablehlo.broadcast_in_dim: operand dim i becomes result dim dims[i]."""
    strides = [0] * len(shape)
    for i, d in enumerate(dims):
      if self.shape[i] == shape[d]:
        strides[d] = self.strides[i]
    return Place(self.tensor, self.offset, tuple(shape), tuple(strides), self.dtype)

  def permuted(self, permutation: Sequence[int]) -> "Place":
    return Place(self.tensor, self.offset, tuple(self.shape[p] for p in permutation),
                 tuple(self.strides[p] for p in permutation), self.dtype)

  def sliced(self, starts: Sequence[int], counts: Sequence[int],
             steps: Sequence[int]) -> "Place":
    offset = self.offset + sum(s * st for s, st in zip(starts, self.strides))
    strides = tuple(st * step for st, step in zip(self.strides, steps))
    return Place(self.tensor, offset, tuple(counts), strides, self.dtype)

  def reversed(self, dims: Sequence[int]) -> "Place":
    offset = self.offset + sum((self.shape[d] - 1) * self.strides[d] for d in dims)
    strides = tuple(-s if d in dims else s for d, s in enumerate(self.strides))
    return Place(self.tensor, offset, self.shape, strides, self.dtype)
