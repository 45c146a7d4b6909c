"""Host speed of the simulator, measured in one run against the JAX CPU backend.

    python benchmarks/simulator_speed.py [--repeats N]

For a few representative programs prints the steady-state host time of one execution on trn
(the simulator running the NeuronCore program, plus the PJRT round trip) and on the CPU backend
for the same jitted JAX function, their ratio, the modeled device time, and a short hash of the
trn outputs: a change to the simulator's speed must leave the last two columns unchanged.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import jax_trn


def _matmul(a, b):
  return a @ b


def _elementwise_chain(x, y):
  return jnp.tanh(x * 1.5 + y) * x - jnp.exp(-jnp.abs(y))


def _row_reduction(x):
  return jnp.sum(x, axis=1)


def _gather(table, idx):
  return table[idx]


def _mlp_step(w1, w2, x, y):
  def loss(w1, w2):
    return jnp.mean((jnp.tanh(x @ w1) @ w2 - y) ** 2)
  g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)
  return w1 - 0.01 * g1, w2 - 0.01 * g2


def _cases(rng: np.random.Generator):
  f32 = lambda *shape: rng.standard_normal(shape, np.float32)
  bf16 = lambda *shape: f32(*shape).astype(jnp.bfloat16)
  return [
      ("matmul 1024^3 fp32", _matmul, (f32(1024, 1024), f32(1024, 1024))),
      ("matmul 1024^3 bf16", _matmul, (bf16(1024, 1024), bf16(1024, 1024))),
      ("elementwise chain, 4M fp32", _elementwise_chain, (f32(2048, 2048), f32(2048, 2048))),
      ("row sum 2048x2048 fp32", _row_reduction, (f32(2048, 2048),)),
      ("gather 4096 rows of 8192x256 fp32", _gather,
       (f32(8192, 256), rng.integers(0, 8192, (4096,), np.int32))),
      ("MLP training step 128x256x512x64", _mlp_step,
       (f32(256, 512) * 0.06, f32(512, 64) * 0.04, f32(128, 256), f32(128, 64))),
  ]


def _steady_s(jitted, args, repeats: int) -> tuple[float, list]:
  out = jax.block_until_ready(jitted(*args))
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(jitted(*args))
    times.append(time.perf_counter() - start)
  return statistics.median(times), out


def _digest(outputs) -> str:
  h = hashlib.sha256()
  for leaf in jax.tree_util.tree_leaves(outputs):
    h.update(np.asarray(leaf).tobytes())
  return h.hexdigest()[:12]


def _register_trn() -> None:
  # An installed jax-trn registers itself through its entry point; a source checkout does not.
  from importlib import metadata
  if not any(ep.name == "trn" for ep in metadata.entry_points(group="jax_plugins")):
    from jax_trn import plugin
    plugin.initialize()


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--repeats", type=int, default=5)
  args = parser.parse_args()
  _register_trn()
  trn, cpu = jax.devices("trn")[0], jax.devices("cpu")[0]
  print(f"jax-trn {jax_trn.__version__}, {trn.device_kind}; jax {jax.__version__}; "
        f"median of {args.repeats} executions")
  print(f"{'program':<36} {'trn ms':>10} {'cpu ms':>10} {'trn/cpu':>8} {'modeled us':>11}  outputs")
  for name, fn, inputs in _cases(np.random.default_rng(0)):
    jitted = jax.jit(fn)
    on_trn = [jax.device_put(a, trn) for a in inputs]
    on_cpu = [jax.device_put(a, cpu) for a in inputs]
    trn_s, out = _steady_s(jitted, on_trn, args.repeats)
    modeled_us = jax_trn.last_execution(trn).device_time_ns / 1e3
    cpu_s, _ = _steady_s(jitted, on_cpu, args.repeats)
    print(f"{name:<36} {trn_s * 1e3:10.2f} {cpu_s * 1e3:10.2f} {trn_s / cpu_s:8.1f} "
          f"{modeled_us:11.1f}  {_digest(out)}")


if __name__ == "__main__":
  main()
