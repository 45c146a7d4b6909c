"""Modeled weak scaling of a data-parallel training step (docs/multi-device.md "Weak scaling"):
a 2-layer MLP (d → h → d, f32, tanh, mean-squared error, SGD), each core a fixed batch, the
gradients averaged with `pmean` under pmap; the same per-core work on 1, 2, 4, ... cores.
Efficiency = the 1-core step's modeled time / the N-core step's (the busiest core's device time).
Each N-core step's parameters are checked against JAX's CPU backend on N devices (up to the
8 host devices it is given here).

  TRN_LNC=1 python benchmarks/weak_scaling.py                    # 1 to 8 cores of one trn2 chip
  TRN_CHIPS=2 python benchmarks/weak_scaling.py --cores 1 4 8    # 8 = 2 chips at LNC=2
  TRN_LNC=1 python benchmarks/weak_scaling.py --batch 64 --d 2 --hidden 128   # a tiny model
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import numpy as np
import jax
import jax.numpy as jnp


def step(params, x, y):
  def loss(p):
    w1, w2 = p
    return jnp.mean((jnp.tanh(x @ w1) @ w2 - y) ** 2)
  grads = jax.lax.pmean(jax.grad(loss)(params), "cores")  # the all-reduce between the cores
  return tuple(p - 0.01 * g for p, g in zip(params, grads))


def modeled_step_ns(devices, params, x, y) -> tuple[float, list[np.ndarray]]:
  from jax_trn import profile
  n = len(devices)
  stack = lambda a: np.broadcast_to(a, (n, *a.shape))
  out = jax.pmap(step, axis_name="cores", devices=devices)(
      tuple(stack(p) for p in params), x, y)
  jax.block_until_ready(out)
  return max(profile.last_execution(d).device_time_ns for d in devices), [np.asarray(o)
                                                                           for o in out]


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--cores", type=int, nargs="+", default=[1, 2, 4, 8])
  parser.add_argument("--batch", type=int, default=256, help="examples per core")
  parser.add_argument("--d", type=int, default=512)
  parser.add_argument("--hidden", type=int, default=2048)
  args = parser.parse_args()
  from importlib import metadata
  if not any(ep.name == "trn" for ep in metadata.entry_points(group="jax_plugins")):
    from jax_trn import plugin
    plugin.initialize()
  rng = np.random.default_rng(0)
  params = (rng.normal(0, args.d ** -0.5, (args.d, args.hidden)).astype(np.float32),
            rng.normal(0, args.hidden ** -0.5, (args.hidden, args.d)).astype(np.float32))
  grad_mib = sum(p.nbytes for p in params) / 2 ** 20
  print(f"MLP {args.d} -> {args.hidden} -> {args.d}, {args.batch} examples per core, "
        f"gradients {grad_mib:.1f} MiB; {jax.devices('trn')[0].device_kind}")
  print(f"{'cores':>5} {'chips':>5} {'step':>10} {'efficiency':>10}")
  base = None
  for n in args.cores:
    devices = jax.devices("trn")[:n]
    x = rng.normal(size=(n, args.batch, args.d)).astype(np.float32)
    y = rng.normal(size=(n, args.batch, args.d)).astype(np.float32)
    ns, got = modeled_step_ns(devices, params, x, y)
    checked = n <= len(jax.devices("cpu"))
    if checked:
      want = jax.pmap(step, axis_name="cores", devices=jax.devices("cpu")[:n])(
          tuple(np.broadcast_to(p, (n, *p.shape)) for p in params), x, y)
      for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-4, atol=1e-5)
    base = ns if base is None else base
    chips = len({d.chip_index for d in devices})
    print(f"{n:>5} {chips:>5} {ns / 1e3:>7.1f} us {base / ns:>9.1%}"
          f"{'' if checked else '  (more cores than CPU devices: not checked)'}")


if __name__ == "__main__":
  main()
