"""Foundation figures, measured in one run against the JAX CPU backend.

    python benchmarks/foundation.py

Prints, for trn and cpu and their ratio: cold compile time of a 2-layer MLP training step, its
compile time from the persistent compile cache in a fresh process (TRN_CACHE_DIR; CPU: a
fresh-process compile),
steady-state execute time of that step and of a 1024x1024x1024 fp32 matmul, eager per-op latency,
and the modeled device time and TensorE utilization of the matmul.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

import jax_trn
from jax_trn import config


def mlp_loss(params, x, y):
  (w1, b1), (w2, b2) = params
  h = jnp.tanh(x @ w1 + b1)
  logits = h @ w2 + b2
  return jnp.mean((logits - y) ** 2)


def sgd_step(params, x, y):
  loss, grads = jax.value_and_grad(mlp_loss)(params, x, y)
  return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads), loss


def mlp_inputs(rng: np.random.Generator):
  def dense(n_in, n_out):
    return (rng.standard_normal((n_in, n_out), np.float32) / np.sqrt(n_in),
            np.zeros((n_out,), np.float32))
  params = (dense(256, 512), dense(512, 64))
  x = rng.standard_normal((128, 256), np.float32)
  y = rng.standard_normal((128, 64), np.float32)
  return params, x, y


def put(tree, device):
  return jax.tree_util.tree_map(lambda a: jax.device_put(a, device), tree)


def lower_and_compile_s(fn, args) -> tuple[float, float]:
  """(JAX's tracing and lowering, then `Lowered.compile()`) seconds of a fresh jit of `fn`: the
  first part is the same work for every backend, the second is the backend's own."""
  # A fresh function object each time: nothing of an earlier compile is reused.
  fresh = jax.jit(lambda *a: fn(*a))
  start = time.perf_counter()
  lowered = fresh.lower(*args)
  lowered_at = time.perf_counter()
  lowered.compile()
  return lowered_at - start, time.perf_counter() - lowered_at


def cold_compile_s(fn, args) -> float:
  return sum(lower_and_compile_s(fn, args))


# Run in a fresh process: the cached compile of the MLP step, as a researcher's next script sees it.
_CACHED_COMPILE_CHILD = """
import json, sys, time
sys.path[:0] = json.loads(sys.argv[1])
from importlib import metadata
import jax
if not any(ep.name == "trn" for ep in metadata.entry_points(group="jax_plugins")):
  from jax_trn import plugin
  plugin.initialize()
import numpy as np
from foundation import cold_compile_s, mlp_inputs, put, sgd_step
from jax_trn import compilation
out = {}
for platform in ("trn", "cpu"):
  out[platform] = cold_compile_s(sgd_step, put(mlp_inputs(np.random.default_rng(0)),
                                              jax.devices(platform)[0]))
out["stats"] = compilation.cache_stats()
print(json.dumps(out))
"""


def fresh_process_compile_s(cache_dir: str) -> dict:
  """Compile times of the MLP step in a fresh process whose TRN_CACHE_DIR is `cache_dir` (the
  CPU figure is a fresh-process cold compile: JAX's persistent cache does not serve CPU by
  default)."""
  # The child imports this file as `foundation` (source locations, hence the cache key, match).
  paths = [os.path.dirname(os.path.abspath(__file__))] + [p for p in sys.path if p]
  env = {**os.environ, "TRN_CACHE_DIR": cache_dir}
  result = subprocess.run([sys.executable, "-c", _CACHED_COMPILE_CHILD, json.dumps(paths)],
                          capture_output=True, text=True, env=env, check=True)
  return json.loads(result.stdout.strip().splitlines()[-1])


def steady_execute_s(jitted, args, repeats: int = 5) -> float:
  jax.block_until_ready(jitted(*args))
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(jitted(*args))
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def print_engines_and_host_execute(run, jitted, trn_args, cpu_args, repeats: int) -> None:
  """The busiest compute engines of a profiled execution `run`, then the steady host execute
  time of `jitted` on trn and on the JAX CPU backend (the same arguments on each device)."""
  busy = sorted(((t.busy_ns, name) for name, t in run.streams.items()
                 if not name.startswith("DMA")), reverse=True)
  print("  busiest engines: " + ", ".join(f"{name} {ns / 1e3:.1f} us" for ns, name in busy[:4]))
  trn_s = steady_execute_s(jitted, trn_args, repeats)
  cpu_s = steady_execute_s(jitted, cpu_args, repeats)
  print(f"  host execute: trn {trn_s * 1e3:.1f} ms, cpu {cpu_s * 1e3:.1f} ms "
        f"(trn/cpu {trn_s / cpu_s:.1f}x)")


def eager_op_latency_s(device, repeats: int = 200) -> float:
  x = jax.device_put(np.ones((64, 64), np.float32), device)
  for _ in range(5):  # warm the per-signature caches
    x = x * 1.0001 + 0.5
  jax.block_until_ready(x)
  start = time.perf_counter()
  for _ in range(repeats):
    x = x * 1.0001
  jax.block_until_ready(x)
  return (time.perf_counter() - start) / repeats


def row(name: str, trn: float, cpu: float, unit: str = "ms", scale: float = 1e3) -> None:
  print(f"{name:<42} trn {trn * scale:10.3f} {unit}   cpu {cpu * scale:10.3f} {unit}   "
        f"trn/cpu {trn / cpu:8.2f}")


def main() -> None:
  trn, cpu = jax.devices("trn")[0], jax.devices("cpu")[0]
  rng = np.random.default_rng(0)
  mlp = mlp_inputs(rng)
  a = rng.standard_normal((1024, 1024), np.float32)
  b = rng.standard_normal((1024, 1024), np.float32)
  matmul = jax.jit(jnp.matmul)
  step = jax.jit(sgd_step)

  print(f"jax-trn {jax_trn.__version__}, {trn.device_kind}; jax {jax.__version__}")
  # An empty persistent cache for this process, so the cold compile really compiles.
  own_cache = tempfile.mkdtemp(prefix="jax-trn-bench-cache-")
  atexit.register(shutil.rmtree, own_cache, True)
  os.environ["TRN_CACHE_DIR"] = own_cache
  row("cold compile, 2-layer MLP training step",
      cold_compile_s(sgd_step, put(mlp, trn)), cold_compile_s(sgd_step, put(mlp, cpu)))
  with tempfile.TemporaryDirectory() as cache_dir:
    fresh_process_compile_s(cache_dir)  # fills the cache (a miss)
    cached = fresh_process_compile_s(cache_dir)
  assert cached["stats"]["hits"] >= 1 and cached["stats"]["misses"] == 0, cached["stats"]
  row("cached compile, MLP step, new process",
      cached["trn"], cached["cpu"])
  row("execute, 2-layer MLP training step",
      steady_execute_s(step, put(mlp, trn)), steady_execute_s(step, put(mlp, cpu)))
  row("execute, 1024x1024x1024 fp32 matmul",
      steady_execute_s(matmul, put((a, b), trn)), steady_execute_s(matmul, put((a, b), cpu)))
  row("eager per-op latency (64x64 multiply)", eager_op_latency_s(trn), eager_op_latency_s(cpu),
      unit="us", scale=1e6)

  jax.block_until_ready(matmul(*put((a, b), trn)))
  profile = jax_trn.last_execution(trn)
  spec = config.target_spec(config.current().target)
  # fp32 matmul: 4 passes of the 128x128 array per cycle-pair (neuroncore.md), one physical core.
  fp32_peak_flops_per_ns = 2 * 128 * 128 * spec["tensor_clock_ghz"] / 4
  print(f"modeled device time, 1024^3 fp32 matmul: {profile.device_time_ns / 1e3:.1f} us; "
        f"TensorE utilization {100 * profile.tensor_engine_utilization(fp32_peak_flops_per_ns):.1f} % "
        f"of the fp32 peak ({fp32_peak_flops_per_ns / 1e3:.1f} TFLOPS)")
  print(profile.format())


if __name__ == "__main__":
  main()
