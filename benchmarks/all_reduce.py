"""Modeled all-reduce time and bus bandwidth (docs/multi-device.md "Timing model"): a `psum`
under pmap over the first N trn devices, for each message size, with the algorithm
choose-collective-algorithm picks and with every collective on the ring.

  python benchmarks/all_reduce.py --cores 2 4          # one trn2 chip
  TRN_CHIPS=2 python benchmarks/all_reduce.py --cores 8
"""

from __future__ import annotations

import argparse

import numpy as np
import jax

_SIZES = {"1 KiB": 1 << 10, "1 MiB": 1 << 20, "64 MiB": 64 << 20}


def modeled_ns(cores: int, nbytes: int) -> float:
  from jax_trn import profile
  devices = jax.devices("trn")[:cores]
  f = jax.pmap(lambda v: jax.lax.psum(v, "i"), axis_name="i", devices=devices)
  jax.block_until_ready(f(np.ones((cores, nbytes // 4), np.float32)))
  return max(profile.last_execution(d).device_time_ns for d in devices)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--cores", type=int, nargs="+", default=[2, 4])
  parser.add_argument("--sizes", nargs="+", default=list(_SIZES), choices=list(_SIZES))
  args = parser.parse_args()
  from importlib import metadata
  if not any(ep.name == "trn" for ep in metadata.entry_points(group="jax_plugins")):
    from jax_trn import plugin
    plugin.initialize()
  from hlo_lowering import pipeline
  chosen = pipeline.PASSES
  ring = tuple(p for p in chosen if p.name != "choose-collective-algorithm")
  print(f"{'cores':>5} {'size':>7} {'chosen':>12} {'ring':>12}  bus bandwidth (chosen)")
  for cores in args.cores:
    for name in args.sizes:
      nbytes = _SIZES[name]
      times = []
      for passes in (chosen, ring):
        pipeline.PASSES = passes
        times.append(modeled_ns(cores, nbytes))
      pipeline.PASSES = chosen
      bus = 2 * (cores - 1) / cores * nbytes / times[0]  # bytes per ns = GB/s
      print(f"{cores:>5} {name:>7} {times[0] / 1e3:>9.1f} us {times[1] / 1e3:>9.1f} us  "
            f"{bus:.1f} GB/s")


if __name__ == "__main__":
  main()
