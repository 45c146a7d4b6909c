"""A Shardy tensor sharding (`#sdy.sharding<@mesh, [{"x"}, {}], unreduced={"y"}>`): which mesh
axes split each dimension, which hold per-core partial sums (unreduced), the local (per-core)
shape it gives, and its HLO sharding text (what JAX reads back from the executable,
docs/multi-device.md)."""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np

from hlo_lowering.errors import CompileError, INVALID_ARGUMENT, UNIMPLEMENTED
from hlo_lowering.passes.partition.mesh import Mesh

_MESH_REF = re.compile(r"<\s*@([\w.$-]+)\s*,\s*\[")
_DIM = re.compile(r"\{([^}]*)\}")
_AXIS_NAME = re.compile(r'"([^"]+)"(:\(\d+\)\d+)?')
_UNREDUCED = re.compile(r"\bunreduced\s*=\s*\{([^}]*)\}")


@dataclasses.dataclass(frozen=True)
class Sharding:
  mesh_name: str
  dims: tuple[tuple[str, ...], ...]  # the axes splitting each dim, major to minor
  # The axes along which cores hold partial sums (JAX's P(unreduced=...)): the sum over the
  # cores that differ only along them is the shard `dims` give.
  unreduced: tuple[str, ...] = ()
  # The dims left open (`{?}`, `{"x", ?}`): propagation may split them further. Not part of
  # the sharding's identity.
  open_dims: tuple[int, ...] = dataclasses.field(default=(), compare=False)

  @classmethod
  def parse(cls, text: str, what: str) -> "Sharding":
    """One tensor sharding as Shardy prints it (inside #sdy.sharding<...> or a per-value list)."""
    match = _MESH_REF.search(text)
    if match is None:
      raise CompileError(f"{what}: cannot read the sharding {text} (an inline mesh?)",
                         UNIMPLEMENTED)
    start = match.end()
    depth, end = 1, start
    while depth and end < len(text):
      depth += {"[": 1, "]": -1}.get(text[end], 0)
      end += 1
    dims, open_dims = [], []
    for d, body in enumerate(_DIM.findall(text[start:end - 1])):
      if "?" in body:
        open_dims.append(d)
      axes = []
      for name, sub in _AXIS_NAME.findall(body):
        if sub:
          raise CompileError(f"{what}: sub-axis sharding {name}{sub} is not supported",
                             UNIMPLEMENTED)
        axes.append(name)
      dims.append(tuple(axes))
    unreduced = _UNREDUCED.search(text[end:])
    return cls(match[1], tuple(dims),
               tuple(_AXIS_NAME_ONLY.findall(unreduced[1])) if unreduced else (),
               tuple(open_dims))

  @property
  def is_replicated(self) -> bool:
    return not any(self.dims) and not self.unreduced

  @property
  def summed(self) -> "Sharding":
    """The sharding of the value the partial sums add up to (no unreduced axes)."""
    return dataclasses.replace(self, unreduced=())

  def restricted(self, axes: set[str]) -> "Sharding":
    """Only the splits and partial sums along `axes` (a manual computation's manual axes)."""
    return Sharding(self.mesh_name, tuple(tuple(a for a in d if a in axes) for d in self.dims),
                    tuple(a for a in self.unreduced if a in axes))

  def shards(self, mesh: Mesh, dim: int) -> int:
    return math.prod(mesh.axis_size(a) for a in self.dims[dim])

  def local_shape(self, shape: tuple[int, ...], mesh: Mesh, what: str) -> tuple[int, ...]:
    """Each dim divided by its shard count; a dim that does not divide evenly is an error."""
    if len(self.dims) != len(shape):
      raise CompileError(f"{what}: a sharding of rank {len(self.dims)} for a rank-{len(shape)} "
                         "value", INVALID_ARGUMENT)
    local = []
    for d, size in enumerate(shape):
      n = self.shards(mesh, d)
      if size % n:
        raise CompileError(
            f"{what}: dim {d} of size {size} does not split evenly into {n} shards (mesh axes "
            f"{', '.join(self.dims[d])} of {mesh.describe()}); NeuronCore programs need equal "
            "shards: pad the array to a multiple", INVALID_ARGUMENT)
      local.append(size // n)
    return tuple(local)

  def hlo_text(self, mesh: Mesh) -> str:
    """The HLO sharding text: {replicated}, {unreduced} or {devices=[...]... } with the
    replicated and unreduced devices in last tile dims, as XLA prints them."""
    if mesh.size == 1 or (not any(self.dims) and not self.unreduced):
      return "{replicated}"
    used = [a for d in self.dims for a in d]
    unreduced = [a for a in self.unreduced if mesh.axis_size(a) > 1]
    unused = [n for n, _ in mesh.axes if n not in used and n not in unreduced]
    tiles = [self.shards(mesh, d) for d in range(len(self.dims))]
    if math.prod(tiles) == 1 and not math.prod(mesh.axis_size(a) for a in unused) > 1:
      return "{unreduced}" if unreduced else "{replicated}"
    last = [(axes, kind) for axes, kind in ((unreduced, "unreduced"), (unused, "replicated"))
            if math.prod(mesh.axis_size(a) for a in axes) > 1]
    shape = tiles + [math.prod(mesh.axis_size(a) for a in axes) for axes, _ in last]
    assignment = np.zeros(shape, dtype=np.int64)
    for device in mesh.device_ids:
      index = [mesh.index_along(device, list(d)) for d in self.dims]
      index += [mesh.index_along(device, axes) for axes, _ in last]
      assignment[tuple(index)] = device
    devices = ",".join(str(int(d)) for d in assignment.reshape(-1))
    kinds = [kind for _, kind in last]
    suffix = (" last_tile_dim_replicate" if kinds == ["replicated"] else
              " last_tile_dims={" + ", ".join(kinds) + "}" if kinds else "")
    return "{devices=[" + ",".join(map(str, shape)) + "]" + devices + suffix + "}"


def per_value(text: str, what: str) -> list[Sharding]:
  """`#sdy.sharding_per_value<[<@mesh, [...]>, ...]>` as one Sharding per value."""
  starts = [m.start() for m in _MESH_REF.finditer(text)]
  return [Sharding.parse(text[s:e], f"{what} value {i}")
          for i, (s, e) in enumerate(zip(starts, starts[1:] + [len(text)]))]


def manual_axes(text: str) -> set[str]:
  """`#sdy<manual_axes{"x", "y"}>` as a set of axis names."""
  return set(_AXIS_NAME_ONLY.findall(text))


_AXIS_NAME_ONLY = re.compile(r'"([^"]+)"')
