"""Topology-aware device meshes: `jax.make_mesh` and `mesh_utils.create_device_mesh` over trn
devices (docs/multi-device.md "Topology").

JAX lays a mesh out by `device_kind` handlers (`mesh_utils.device_kind_handler_dict`); for other
platforms it reshapes the devices in the order given. A trn device's `coords` are its chip's
(x, y, z) in the system's torus (pjrt_plugin/sim/chip_topology.h, chip = x + 4 y + 16 z). The
handler orders the devices so that each mesh axis's neighbours are neighbours on the wire: the
last axis (JAX's convention: the most network-intensive) runs over the cores of one chip
(`core_on_chip`), and the chips follow a snake through the torus — each row of x one way, the
next the other way back, each plane of y likewise, so consecutive chips are one link apart
and a ring over a whole torus closes over a wrap-around link, where the row-major order would
jump back across each row.
"""

from __future__ import annotations

import numpy as np

from jax_trn import _native, config


def snake_position(coords) -> tuple[int, int, int]:
  """Where a chip at torus `coords` (x, y, z) comes in the snake through the torus: planes of
  z in order, their rows of y alternately forward and back, each row's x alternately forward
  and back (a plane has an even number of rows, so each plane starts above where the last
  ended)."""
  x, y, z = coords
  return (z, y if z % 2 == 0 else -y, x if (y + z) % 2 == 0 else -x)


def create_device_mesh(mesh_shape, devices, *, contiguous_submeshes: bool = False) -> np.ndarray:
  """The devices (all trn) ordered by snake position of their chip, then core on the chip, in
  `mesh_shape`. One process owns every device, so every submesh is contiguous."""
  del contiguous_submeshes
  ordered = sorted(devices, key=lambda d: (snake_position(d.coords), d.core_on_chip))
  mesh = np.empty(len(ordered), dtype=object)
  mesh[:] = ordered
  return mesh.reshape(tuple(mesh_shape))


def device_kinds() -> list[str]:
  """Every trn `device_kind` (pjrt_plugin/device_description.cc spells them)."""
  kinds = []
  for target in _native.target_names():
    spec = config.target_spec(target)
    for lnc in sorted({1, spec["default_lnc"]}):
      kinds.append(f"{spec['core_version']} ({target}, LNC={lnc}, simulated)")
  return kinds


def register() -> None:
  from jax.experimental import mesh_utils
  for kind in device_kinds():
    mesh_utils.device_kind_handler_dict[kind] = create_device_mesh
