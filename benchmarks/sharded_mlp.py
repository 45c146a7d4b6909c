"""A 2-layer MLP training step under FSDP (parameters and batch sharded over 'data') and under
Megatron tensor parallelism (first layer column parallel, second row parallel, over 'model'):
per core, the modeled device time and the matmul FLOPs, and the collectives the program emits
(docs/multi-device.md "Partitioned compute"). Each step is checked against JAX's CPU backend on
as many host devices.

  TRN_LNC=1 python benchmarks/sharded_mlp.py --cores 4 8     # one trn2 chip, 8 cores
"""

from __future__ import annotations

import argparse
import collections
import os

# The CPU reference needs as many host devices; XLA reads the flag when its backend starts.
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_force_host_platform_device_count=8").strip()

import numpy as np  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "collective_permute")


def loss(params, x, y):
  w1, w2 = params
  return jnp.mean((jax.nn.relu(x @ w1) @ w2 - y) ** 2)


def step(params, x, y):
  value, grads = jax.value_and_grad(loss)(params, x, y)
  return [p - 0.1 * g for p, g in zip(params, grads)], value


def sharded_step(devices, mode: str):
  """The jitted step over `devices` under "fsdp", "tp" or "replicated" (one core's work)."""
  axis = "model" if mode == "tp" else "data"
  mesh = Mesh(np.array(devices), (axis,))
  named = lambda *spec: NamedSharding(mesh, P(*spec))
  if mode == "fsdp":
    params, batch = [named("data", None), named("data", None)], named("data", None)
  elif mode == "tp":
    params, batch = [named(None, "model"), named("model", None)], named()
  else:
    params, batch = [named(), named()], named()
  return jax.jit(step, in_shardings=(params, batch, batch), out_shardings=(params, named()))


def collectives(report) -> str:
  """The collectives of the last compiled program, and the ops it ran replicated."""
  counts = collections.Counter(e.op.removeprefix("stablehlo.") for e in report.ops
                               if e.op.removeprefix("stablehlo.") in _COLLECTIVES)
  text = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "none"
  if report.replicated_ops:
    text += f"; replicated: {', '.join(report.replicated_ops)}"
  return text


def measure(mode: str, cores: int, batch: int, d_model: int, d_hidden: int) -> dict:
  from jax_trn import compilation, profile
  rng = np.random.default_rng(0)
  params = [rng.standard_normal((d_model, d_hidden), np.float32) * 0.1,
            rng.standard_normal((d_hidden, d_model), np.float32) * 0.1]
  x = rng.standard_normal((batch, d_model), np.float32)
  y = rng.standard_normal((batch, d_model), np.float32)
  devices = jax.devices("trn")[:cores]
  f = sharded_step(devices, mode)
  got = jax.block_until_ready(f(params, x, y))
  want = sharded_step(jax.devices("cpu")[:cores], mode)(params, x, y)
  for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-5)
  runs = [profile.last_execution(d) for d in devices]
  return {"time_us": max(r.device_time_ns for r in runs) / 1e3,
          "flops": max(r.matmul_flops for r in runs),
          "collectives": collectives(compilation.last_report())}


def register_trn() -> None:
  # An installed jax-trn registers itself through its entry point; a source checkout does not.
  from importlib import metadata
  if not any(ep.name == "trn" for ep in metadata.entry_points(group="jax_plugins")):
    from jax_trn import plugin
    plugin.initialize()


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--cores", type=int, nargs="+", default=[4])
  parser.add_argument("--batch", type=int, default=256)
  parser.add_argument("--d-model", type=int, default=512)
  parser.add_argument("--d-hidden", type=int, default=2048)
  args = parser.parse_args()
  register_trn()
  print(f"MLP {args.batch}x{args.d_model} -> {args.d_hidden} -> {args.d_model}, f32, step = "
        "forward + backward + SGD update")
  print(f"{'mode':<11}{'cores':>6}{'modeled us/core':>17}{'matmul GFLOP/core':>19}  collectives")
  one = measure("replicated", 1, args.batch, args.d_model, args.d_hidden)
  print(f"{'one core':<11}{1:>6}{one['time_us']:>17.1f}{one['flops'] / 1e9:>19.4f}")
  for cores in args.cores:
    for mode in ("fsdp", "tp"):
      result = measure(mode, cores, args.batch, args.d_model, args.d_hidden)
      print(f"{mode:<11}{cores:>6}{result['time_us']:>17.1f}{result['flops'] / 1e9:>19.4f}  "
            f"{result['collectives']}")


if __name__ == "__main__":
  main()
