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


def _reshaped_strides(shape: Sequence[int], strides: Sequence[int],
                      new_shape: Sequence[int]) -> tuple[int, ...] | None:
  """Strides that address a non-empty view of `shape`/`strides` as `new_shape` in the same
  element order, or None. Old and new dims are matched in groups of equal element count; a group
  of old dims must nest evenly (each stride = the next one's stride x count), and the new dims
  of the group then split that run (numpy's no-copy reshape rule)."""
  old = [(c, s) for c, s in zip(shape, strides) if c != 1]
  new = [(i, c) for i, c in enumerate(new_shape) if c != 1]
  result = [0] * len(new_shape)  # size-1 dims: any stride addresses their one element
  oi = ni = 0
  while oi < len(old) and ni < len(new):
    old_count, new_count, oj, nj = old[oi][0], new[ni][1], oi + 1, ni + 1
    while old_count != new_count:
      if old_count < new_count:
        old_count *= old[oj][0]
        oj += 1
      else:
        new_count *= new[nj][1]
        nj += 1
    if any(old[k][1] != old[k + 1][1] * old[k + 1][0] for k in range(oi, oj - 1)):
      return None
    stride = old[oj - 1][1]
    for index, count in reversed(new[ni:nj]):
      result[index] = stride
      stride *= count
    oi, ni = oj, nj
  return tuple(result)


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

  def reshaped(self, shape: Sequence[int]) -> "Place | None":
    """The same elements in row-major order viewed as `shape`, or None when a strided view
    cannot express that (the merged dims are not evenly strided), so the data must be copied."""
    shape = tuple(shape)
    if self.is_dense or math.prod(shape) == 0:
      return Place.dense(self.tensor, shape, self.dtype, self.offset)
    strides = _reshaped_strides(self.shape, self.strides, shape)
    if strides is None:
      return None
    return Place(self.tensor, self.offset, shape, strides, self.dtype)

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


def same_elements(a: "Place | None", b: "Place | None") -> bool:
  """Whether two places name the same elements in the same order (strides of unit dims aside)."""
  if a is None or b is None:
    return False
  return (a.tensor == b.tensor and a.offset == b.offset and a.shape == b.shape
          and a.dtype == b.dtype
          and all(sa == sb for n, sa, sb in zip(a.shape, a.strides, b.strides) if n != 1))
