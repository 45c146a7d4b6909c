"""A Shardy mesh (`sdy.mesh`): named axes over the executable's devices, and the core groups
that vary along some of its axes (the replica groups of a collective over those axes)."""

from __future__ import annotations

import dataclasses
import math
import re

from hlo_lowering.errors import CompileError, INVALID_ARGUMENT

_AXIS = re.compile(r'"([^"]+)"\s*=\s*(\d+)')
_DEVICE_IDS = re.compile(r"device_ids\s*=\s*\[([\d,\s]*)\]")


@dataclasses.dataclass(frozen=True)
class Mesh:
  axes: tuple[tuple[str, int], ...]  # (name, size), major to minor
  device_ids: tuple[int, ...]        # the device (core rank) at each mesh position, row-major

  @classmethod
  def parse(cls, text: str) -> "Mesh":
    """`#sdy.mesh<["x"=2, "y"=4]>` (device_ids=[...] optional; default: iota)."""
    axes = tuple((name, int(size)) for name, size in _AXIS.findall(text))
    ids = _DEVICE_IDS.search(text)
    size = math.prod(s for _, s in axes)
    device_ids = (tuple(int(i) for i in ids[1].split(",") if i.strip()) if ids
                  else tuple(range(size)))
    return cls(axes, device_ids)

  @property
  def size(self) -> int:
    return len(self.device_ids)

  def axis_size(self, name: str) -> int:
    for axis, size in self.axes:
      if axis == name:
        return size
    raise CompileError(f"axis {name!r} is not in the mesh {self.describe()}", INVALID_ARGUMENT)

  def describe(self) -> str:
    return "[" + ", ".join(f"{n}={s}" for n, s in self.axes) + "]"

  def coords(self, device: int) -> dict[str, int]:
    """The mesh coordinates of `device`."""
    position = self.device_ids.index(device)
    coords = {}
    for name, size in reversed(self.axes):
      coords[name] = position % size
      position //= size
    return coords

  def index_along(self, device: int, axes: list[str]) -> int:
    """`device`'s position along `axes` taken together, the first the most major."""
    coords = self.coords(device)
    index = 0
    for name in axes:
      index = index * self.axis_size(name) + coords[name]
    return index

  def groups(self, axes: list[str]) -> list[list[int]]:
    """The devices that differ only along `axes`, one group per value of the other axes, each
    ordered by `index_along(axes)`."""
    for name in axes:
      self.axis_size(name)
    others = [n for n, _ in self.axes if n not in axes]
    by_key: dict[tuple, list[int]] = {}
    for device in self.device_ids:
      coords = self.coords(device)
      by_key.setdefault(tuple(coords[n] for n in others), []).append(device)
    return [sorted(group, key=lambda d: self.index_along(d, axes))
            for _, group in sorted(by_key.items())]
