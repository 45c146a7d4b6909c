"""An AdamW update of 10 M fp32 parameters against the HBM-bandwidth lower bound (issue 7).

    TRN_PROFILE=1 python benchmarks/optimizer_update.py [--target trn2] [--repeats 3]

One optax.adamw step (update, then apply_updates) over a parameter tree of 10 M fp32 values on
one JAX device. Prints the modeled device time, the HBM traffic, the necessary bytes (gradients,
parameters and both moments read once; parameters and moments written once) and the bound:
necessary bytes over the device's HBM bandwidth; the busiest engines; and the steady host
execute time of trn and of the JAX CPU backend in the same run (with their ratio).
"""

from __future__ import annotations

import argparse
import os

import jax
import numpy as np
import optax

parser = argparse.ArgumentParser()
parser.add_argument("--target", default=os.environ.get("TRN_TARGET", "trn2"))
parser.add_argument("--repeats", type=int, default=3)
options = parser.parse_args()
os.environ["TRN_TARGET"] = options.target
os.environ["TRN_PROFILE"] = "1"
os.environ["TRN_CACHE_DIR"] = ""

from foundation import print_engines_and_host_execute, put  # noqa: E402
from jax_trn import plugin, profile  # noqa: E402

plugin.initialize()

# 10,000,000 values: two 4 M weight matrices and a 2 M embedding.
SHAPES = {"w1": (2000, 2000), "w2": (2000, 2000), "embedding": (1000, 2000)}

tx = optax.adamw(1e-3, weight_decay=1e-2)


def _update(grads, state, params):
  updates, state = tx.update(grads, state, params)
  return optax.apply_updates(params, updates), state


def _arguments(device):
  rng = np.random.default_rng(0)
  params = {k: rng.standard_normal(s, np.float32) for k, s in SHAPES.items()}
  grads = {k: rng.standard_normal(s, np.float32) for k, s in SHAPES.items()}
  with jax.default_device(jax.devices("cpu")[0]):
    state = tx.init(params)
  # Non-zero moments and a count past 1, as in the middle of training.
  state = jax.tree_util.tree_map(
      lambda a: np.abs(rng.standard_normal(a.shape, np.float32)) if a.dtype.kind == "f"
      else np.asarray(a) + 3, state)
  return put((grads, state, params), device)


trn, cpu = jax.devices("trn")[0], jax.devices("cpu")[0]
args = _arguments(trn)
step = jax.jit(_update)
out = jax.block_until_ready(step(*args))
run = profile.last_execution(trn)
leaves = lambda tree: jax.tree_util.tree_leaves(tree)
necessary = sum(a.nbytes for a in leaves(args)) + sum(a.nbytes for a in leaves(out))
count = sum(a.size for a in leaves(args[2]))
hbm_bound = necessary / run.peak().hbm_bytes_per_ns
time = run.device_time_ns
print(f"{options.target} AdamW update of {count / 1e6:.2f} M fp32 params: {time / 1e3:.1f} us, "
      f"HBM {run.hbm_bytes / 1e6:.1f} MB (necessary {necessary / 1e6:.1f} MB); "
      f"{time / hbm_bound:.2f}x the HBM bound ({hbm_bound / 1e3:.1f} us); "
      f"MBU {100 * run.device_utilization().mbu:.1f} %")
print_engines_and_host_execute(run, step, args, put(args, cpu), options.repeats)
