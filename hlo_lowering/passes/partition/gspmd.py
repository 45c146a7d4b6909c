"""GSPMD shardings (`mhlo.sharding = "{devices=[4,1]0,1,2,3}"`), what torch_xla's SPMD mode
(`xs.mark_sharding`) and HLO protos carry instead of Shardy's: each becomes a Sharding over a
mesh of its own, one axis per tiled dim (and one for last_tile_dim_replicate), so the
partitioner treats both alike."""

from __future__ import annotations

import re

import numpy as np

from hlo_lowering.errors import CompileError, UNIMPLEMENTED
from hlo_lowering.passes.partition.mesh import Mesh
from hlo_lowering.passes.partition.sharding import Sharding

_TILED = re.compile(r"^\{devices=\[([\d,]+)\]([^ }]*)( last_tile_dim_replicate)?\}$")
_IOTA = re.compile(r"^<=\[([\d,]+)\](?:T\(([\d,]+)\))?$")


def _devices(text: str, count: int) -> list[int]:
  iota = _IOTA.match(text)
  if iota is None:
    return [int(d) for d in text.split(",")]
  shape = [int(d) for d in iota[1].split(",")]
  ids = np.arange(int(np.prod(shape))).reshape(shape)
  if iota[2]:
    ids = ids.transpose([int(p) for p in iota[2].split(",")])
  return [int(d) for d in ids.reshape(-1)][:count]


def parse(text: str, rank: int, name: str, what: str) -> tuple[Mesh, Sharding] | None:
  """(its mesh, the Sharding) of a GSPMD sharding of a rank-`rank` value; None when replicated."""
  text = text.strip()
  if text in ("{replicated}", "{}"):
    return None
  match = _TILED.match(text)
  if match is None:
    raise CompileError(f"{what}: the sharding {text} is not supported (tiled, replicated or "
                       "last_tile_dim_replicate shardings are)", UNIMPLEMENTED)
  tiles = [int(t) for t in match[1].split(",")]
  replicated = bool(match[3])
  if len(tiles) != rank + (1 if replicated else 0):
    raise CompileError(f"{what}: the sharding {text} does not fit a rank-{rank} value",
                       UNIMPLEMENTED)
  axes = tuple((f"_t{d}", t) for d, t in enumerate(tiles[:rank])) + (
      (("_r", tiles[-1]),) if replicated else ())
  mesh = Mesh(axes, tuple(_devices(match[2], int(np.prod(tiles)))))
  dims = tuple((f"_t{d}",) if t > 1 else () for d, t in enumerate(tiles[:rank]))
  return mesh, Sharding(name, dims)
