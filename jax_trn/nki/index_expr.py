"""Beta 1 index expressions: `nl.arange` and `nl.mgrid` index vectors, placed on an axis of an
index grid (`i_p = nl.arange(128)[:, None]`, `i_f = nl.arange(512)[None, :]`, or
`i_p, i_f = nl.mgrid[0:128, 0:512]`) and shifted or scaled by ints (`i_p + 128 * t`). Indexing
a tensor with them (`a[i_p, i_f]`) is the slice each one spans, so the legacy
`nl.load(a[i_p, i_f])` style runs; what a slice cannot say (two vectors combined into one index,
an index order that transposes, masks) is refused with a KernelError.
"""

from __future__ import annotations

from jax_trn.nki.errors import kernel_error


class IndexExpr:
  """start + step * i for i in range(count), on `axis` of an `ndim`-d index grid (axis None:
  a 1-d vector not yet placed)."""

  def __init__(self, start: int, step: int, count: int, axis: int | None = None, ndim: int = 1):
    self.start, self.step, self.count, self.axis, self.ndim = start, step, count, axis, ndim

  def _with(self, start=None, step=None, axis=None, ndim=None) -> "IndexExpr":
    return IndexExpr(self.start if start is None else start, self.step if step is None else step,
                     self.count, self.axis if axis is None else axis,
                     self.ndim if ndim is None else ndim)

  def __getitem__(self, key) -> "IndexExpr":
    """[:, None] / [None, :] (and the n-d forms): the vector on the axis of the one slice."""
    key = key if isinstance(key, tuple) else (key,)
    slices = [i for i, k in enumerate(key) if isinstance(k, slice) and k == slice(None)]
    if self.axis is not None or len(slices) != 1 or any(
        k is not None for i, k in enumerate(key) if i != slices[0]):
      raise kernel_error(f"index expression {self!r}[{key}]: place an nl.arange vector on one "
                         "axis with [:, None] or [None, :]")
    return self._with(axis=slices[0], ndim=len(key))

  def _int(self, other, what: str) -> int:
    if isinstance(other, IndexExpr):
      raise kernel_error(f"index expressions combined ({what} of two nl.arange vectors) are "
                         "not slices: index each dim with its own vector")
    if not isinstance(other, int) or isinstance(other, bool):
      raise kernel_error(f"index expression {what} {other!r}: only ints shift or scale an "
                         "nl.arange vector")
    return other

  def __add__(self, other):
    return self._with(start=self.start + self._int(other, "+"))

  __radd__ = __add__

  def __sub__(self, other):
    return self._with(start=self.start - self._int(other, "-"))

  def __mul__(self, other):
    factor = self._int(other, "*")
    if factor <= 0:
      raise kernel_error(f"index expression * {factor}: only positive scales are slices")
    return self._with(start=self.start * factor, step=self.step * factor)

  __rmul__ = __mul__

  def as_slice(self, position: int, positions: int) -> slice:
    """The slice this expression spans as the `position`-th of `positions` expressions
    indexing one tensor (they must keep the grid's axis order: no transposing index)."""
    if self.axis is None and positions > 1:
      raise kernel_error("several nl.arange vectors index one tensor: place each on its axis "
                         "([:, None], [None, :]) or use nl.mgrid")
    if self.axis is not None and (self.ndim != positions or self.axis != position):
      raise kernel_error(f"index expression on axis {self.axis} of a {self.ndim}-d grid used as "
                         f"index expression {position} of {positions}: the index order must "
                         "follow the grid's axes (a transposing index is not a slice)")
    if self.start < 0:
      raise kernel_error(f"index expression starts at {self.start}: indices must be >= 0")
    return slice(self.start, self.start + self.step * self.count, self.step)

  def __repr__(self):
    return f"arange({self.start}, step {self.step}, count {self.count})"


def arange(start, stop=None, step=1) -> IndexExpr:
  if stop is None:
    start, stop = 0, start
  for value in (start, stop, step):
    if not isinstance(value, int) or isinstance(value, bool):
      raise kernel_error(f"nl.arange({start}, {stop}, {step}): ints only")
  if step <= 0:
    raise kernel_error(f"nl.arange step {step}: only positive steps are slices")
  return IndexExpr(start, step, len(range(start, stop, step)))


class _MeshGrid:
  """nl.mgrid[0:128, 0:512]: one index vector per slice, each on its own axis of the grid."""

  def __getitem__(self, key):
    key = key if isinstance(key, tuple) else (key,)
    exprs = []
    for axis, k in enumerate(key):
      if not isinstance(k, slice) or k.stop is None:
        raise kernel_error(f"nl.mgrid[{key}]: index it with start:stop[:step] slices")
      vector = arange(k.start or 0, k.stop, k.step or 1)
      exprs.append(vector._with(axis=axis, ndim=len(key)))
    return tuple(exprs) if len(exprs) > 1 else exprs[0]


mgrid = _MeshGrid()
