"""A Shardy tensor sharding (`#sdy.sharding<@mesh, [{"x"}, {}]>`): which mesh axes split each
dimension, the local (per-core) shape it gives, and its HLO sharding text (what JAX reads back
from the executable, docs/multi-device.md)."""

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
_UNREDUCED = re.compile(r"\bunreduced\s*=\s*\{\s*\"")


@dataclasses.dataclass(frozen=True)
class Sharding:
  mesh_name: str
  dims: tuple[tuple[str, ...], ...]  # the axes splitting each dim, major to minor

  @classmethod
  def parse(cls, text: str, what: str) -> "Sharding":
    """One tensor sharding as Shardy prints it (inside #sdy.sharding<...> or a per-value list)."""
    match = _MESH_REF.search(text)
    if match is None:
      raise CompileError(f"{what}: cannot read the sharding {text} (an inline mesh?)",
                         UNIMPLEMENTED)
    if _UNREDUCED.search(text):
      # Per-core partial sums, not a shard: read as one, they would be summed twice.
      raise CompileError(f"{what}: the unreduced sharding {text.strip()} (explicit-axis partial "
                         "sums, P(unreduced=...)) is not supported yet", UNIMPLEMENTED)
    start = match.end()
    depth, end = 1, start
    while depth and end < len(text):
      depth += {"[": 1, "]": -1}.get(text[end], 0)
      end += 1
    dims = []
    for body in _DIM.findall(text[start:end - 1]):
      axes = []
      for name, sub in _AXIS_NAME.findall(body):
        if sub:
          raise CompileError(f"{what}: sub-axis sharding {name}{sub} is not supported",
                             UNIMPLEMENTED)
        axes.append(name)
      dims.append(tuple(axes))
    return cls(match[1], tuple(dims))

  @property
  def is_replicated(self) -> bool:
    return not any(self.dims)

  def restricted(self, axes: set[str]) -> "Sharding":
    """Only the splits along `axes` (a manual computation's manual axes)."""
    return Sharding(self.mesh_name, tuple(tuple(a for a in d if a in axes) for d in self.dims))

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
    """The HLO sharding text ({replicated} or {devices=[...]... last_tile_dim_replicate})."""
    if self.is_replicated or mesh.size == 1:
      return "{replicated}"
    used = [a for d in self.dims for a in d]
    unused = [n for n, _ in mesh.axes if n not in used]
    tiles = [self.shards(mesh, d) for d in range(len(self.dims))]
    replicas = math.prod(mesh.axis_size(a) for a in unused)
    shape = tiles + ([replicas] if replicas > 1 else [])
    assignment = np.zeros(shape, dtype=np.int64)
    for device in mesh.device_ids:
      index = [mesh.index_along(device, list(d)) for d in self.dims]
      if replicas > 1:
        index.append(mesh.index_along(device, unused))
      assignment[tuple(index)] = device
    devices = ",".join(str(int(d)) for d in assignment.reshape(-1))
    suffix = " last_tile_dim_replicate" if replicas > 1 else ""
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
