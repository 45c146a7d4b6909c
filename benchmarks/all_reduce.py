"""Modeled all-reduce time and bus bandwidth (docs/multi-device.md "Timing model"), as
nccom-test reports them: the collective's own time (from the group's last arrival to its end),
algbw = size / time, busbw = 2 (n − 1) / n × algbw, over the first N trn devices in
jax.make_mesh's order.

Sizes whose buffers fit `--run-limit` (all cores together) run: a `psum` under pmap, its
all_reduce instruction's time read from the execution's timeline, checked equal to the
interconnect model's figure for the same instruction (`jax_trn._native.interconnect_ns`).
Larger sizes are the model's figure alone (the host cannot hold 64 cores × 1 GiB). The
algorithm is choose-collective-algorithm's; "ring" is the ring's time. "peak" is the ring's
bus bandwidth at 1 TiB (latency amortized away): the slowest link the ring crosses.

  TRN_LNC=1 python benchmarks/all_reduce.py --cores 2 4 8            # one trn2 chip
  TRN_CHIPS=8 TRN_LNC=1 python benchmarks/all_reduce.py --cores 64   # 8 chips of a 4x4 torus
"""

from __future__ import annotations

import argparse

import numpy as np
import jax

_SIZES = {"1 KiB": 1 << 10, "32 KiB": 32 << 10, "1 MiB": 1 << 20, "32 MiB": 32 << 20,
          "64 MiB": 64 << 20, "256 MiB": 256 << 20, "1 GiB": 1 << 30}


def executed_ns(devices, nbytes: int) -> float:
  """The all_reduce instruction's time on the core that arrived last (no wait in it)."""
  from jax_trn import profile
  cores = len(devices)
  f = jax.pmap(lambda v: jax.lax.psum(v, "i"), axis_name="i", devices=devices)
  with profile.trace():
    jax.block_until_ready(f(np.ones((cores, nbytes // 4), np.float32)))
  return min(next(o.busy_ns for o in profile.last_execution(d).by_op()
                  if o.op == "stablehlo.all_reduce") for d in devices)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--cores", type=int, nargs="+", default=[2, 4])
  parser.add_argument("--sizes", nargs="+", default=list(_SIZES), choices=list(_SIZES))
  parser.add_argument("--run-limit", type=int, default=256 << 20,
                      help="largest total bytes (size × cores) to run; larger: the model alone")
  args = parser.parse_args()
  from importlib import metadata
  if not any(ep.name == "trn" for ep in metadata.entry_points(group="jax_plugins")):
    from jax_trn import plugin
    plugin.initialize()
  from jax.experimental import mesh_utils
  from hlo_lowering.passes.collectives.choose_algorithm import algorithm_for
  from hlo_lowering.program.enums import COLLECTIVE_ALL_REDUCE, COLLECTIVE_RING
  from jax_trn import _native, config
  names = {0: "ring", 1: "halving-doubling", 2: "hierarchical"}
  per_chip = config.current().devices_per_chip()
  print(f"{'cores':>5} {'size':>8} {'algorithm':>16} {'time':>11} {'ring':>11} "
        f"{'busbw':>9} {'of peak':>8}  how")
  for cores in args.cores:
    # In jax.make_mesh's order (chips snaking through the torus), as a user's mesh has them.
    devices = list(mesh_utils.create_device_mesh((cores,), jax.devices("trn")[:cores]))
    target = devices[0].target
    groups = [list(range(cores))]
    chips = [d.chip_index for d in devices]

    def model(algorithm, nbytes):
      return _native.interconnect_ns(COLLECTIVE_ALL_REDUCE, algorithm, nbytes, groups, chips,
                                     target)
    bus = lambda nbytes, ns: 2 * (cores - 1) / cores * nbytes / ns  # bytes per ns = GB/s
    peak = bus(1 << 40, model(COLLECTIVE_RING, 1 << 40))
    for name in args.sizes:
      nbytes = _SIZES[name]
      algorithm = algorithm_for("stablehlo.all_reduce", nbytes, groups, per_chip)
      ns, how = model(algorithm, nbytes), "model"
      if nbytes * cores <= args.run_limit:
        ran = executed_ns(devices, nbytes)
        assert abs(ran - ns) <= 1e-6 * ns, (cores, name, ran, ns)
        how = "ran = model"
      print(f"{cores:>5} {name:>8} {names[algorithm]:>16} {ns / 1e3:>8.1f} us "
            f"{model(COLLECTIVE_RING, nbytes) / 1e3:>8.1f} us {bus(nbytes, ns):>6.1f} GB/s "
            f"{bus(nbytes, ns) / peak:>7.0%}  {how}")
    print(f"{cores:>5} peak {peak:.0f} GB/s (chips {sorted(set(chips))})")


if __name__ == "__main__":
  main()
