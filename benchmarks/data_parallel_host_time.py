"""Host time of the simulated multi-core data-parallel step against JAX's CPU backend (issue 8's
"host wall time ≤ 2×" figure).

    TRN_CHIPS=2 python benchmarks/data_parallel_host_time.py [--repeats N] [--rounds N]

Runs examples/pmap_data_parallel.py's pmap'd training step (per-core batch 64) on every trn
device and on as many CPU host devices (`--xla_force_host_platform_device_count`, set here),
the same inputs on both, the two alternated `--rounds` times; prints the median wall time and
process CPU time (all threads) of one steady-state step on each, and their ratios. On a shared
host, trust the CPU-time ratio: wall time includes waiting for other processes.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import time

# At most 8 devices per chip (trn2 at LNC=1); the CPU run takes as many as trn has.
_COUNT = int(os.environ.get("TRN_CHIPS", "1")) * 8
os.environ.setdefault("XLA_FLAGS", f"--xla_force_host_platform_device_count={_COUNT}")

import jax  # noqa: E402  (after XLA_FLAGS)
import numpy as np  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
import pmap_data_parallel as example  # noqa: E402


def _register_trn() -> None:
  # An installed jax-trn registers itself through its entry point; a source checkout does not.
  from importlib import metadata
  if not any(ep.name == "trn" for ep in metadata.entry_points(group="jax_plugins")):
    from jax_trn import plugin
    plugin.initialize()


def _step_times(devices, repeats: int) -> tuple[float, float]:
  """(median wall s, median process CPU s) of one steady-state step on `devices`."""
  n = len(devices)
  params = example.model.init(jax.random.key(0), np.ones((1, 2), np.float32))
  replicate = lambda tree: jax.tree.map(lambda a: np.broadcast_to(a, (n, *a.shape)), tree)
  state = (replicate(params), replicate(example.tx.init(params)))
  step = jax.pmap(example.parallel_step, axis_name="cores", devices=devices)
  rng = np.random.default_rng(0)
  x = rng.normal(size=(n, 64, 2)).astype(np.float32)
  y = rng.integers(0, 2, (n, 64)).astype(np.int32)
  *state, loss = step(*state, x, y)  # compile and warm up
  jax.block_until_ready(loss)
  walls, cpus = [], []
  for _ in range(repeats):
    wall, cpu = time.perf_counter(), time.process_time()
    *state, loss = step(*state, x, y)
    jax.block_until_ready(loss)
    walls.append(time.perf_counter() - wall)
    cpus.append(time.process_time() - cpu)
  return statistics.median(walls), statistics.median(cpus)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--repeats", type=int, default=50)
  parser.add_argument("--rounds", type=int, default=3)
  args = parser.parse_args()
  _register_trn()
  trn, cpu = jax.devices("trn"), jax.devices("cpu")[:len(jax.devices("trn"))]
  if len(cpu) < len(trn):
    sys.exit(f"the CPU backend has {len(cpu)} devices, trn {len(trn)}: set XLA_FLAGS="
             f"--xla_force_host_platform_device_count={len(trn)}")
  print(f"{len(trn)} x {trn[0].device_kind} against {len(cpu)} CPU devices; median of "
        f"{args.repeats} steps per round")
  print(f"{'round':>5} {'trn wall ms':>12} {'cpu wall ms':>12} {'ratio':>6} "
        f"{'trn cpu-time ms':>16} {'cpu cpu-time ms':>16} {'ratio':>6}")
  for r in range(args.rounds):
    trn_wall, trn_cpu = _step_times(trn, args.repeats)
    cpu_wall, cpu_cpu = _step_times(cpu, args.repeats)
    print(f"{r:>5} {trn_wall * 1e3:12.2f} {cpu_wall * 1e3:12.2f} {trn_wall / cpu_wall:6.1f} "
          f"{trn_cpu * 1e3:16.2f} {cpu_cpu * 1e3:16.2f} {trn_cpu / cpu_cpu:6.1f}")


if __name__ == "__main__":
  main()
