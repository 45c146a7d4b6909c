"""A long elementwise chain over both engines against its engine and HBM lower bounds (issue 7):
jax.nn.gelu forward and backward in one fused tile loop.

    TRN_PROFILE=1 python benchmarks/elementwise_pipeline.py [--target trn2] [--rows 2048]
                                                            [--cols 4096] [--repeats 3]

`y, dx = gelu(x), vjp(gelu)(x)(dy)` in bf16 over [rows, cols] on one JAX device (the MLP's
activation in a transformer block's forward and backward): one trn.fusion of about twenty ops a
tile that alternate between ScalarE and VectorE (lowering/elementwise_engines.py,
lowering/stage_buffers.py). Prints the modeled device time against the busiest engine's busy
time (the engine bound: the chain's instructions on the engine that must run them, so 1.0x is a
pipeline where neither engine waits on the other) and against the HBM bound (x and dy read, y
and dx written once), whether the outputs have the CPU backend's bits, and the steady host
execute time of trn and of the JAX CPU backend in the same run.
"""

from __future__ import annotations

import argparse
import os

import jax
import ml_dtypes
import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("--target", default=os.environ.get("TRN_TARGET", "trn2"))
parser.add_argument("--rows", type=int, default=2048)
parser.add_argument("--cols", type=int, default=4096)
parser.add_argument("--repeats", type=int, default=3)
options = parser.parse_args()
os.environ["TRN_TARGET"] = options.target
os.environ["TRN_PROFILE"] = "1"
os.environ["TRN_CACHE_DIR"] = ""

from foundation import print_engines_and_host_execute, put  # noqa: E402
from jax_trn import plugin, profile  # noqa: E402

plugin.initialize()


def gelu_forward_and_backward(x, dy):
  y, vjp = jax.vjp(jax.nn.gelu, x)
  return y, vjp(dy)[0]


trn, cpu = jax.devices("trn")[0], jax.devices("cpu")[0]
rng = np.random.default_rng(0)
inputs = [rng.standard_normal((options.rows, options.cols)).astype(ml_dtypes.bfloat16)
          for _ in range(2)]
step = jax.jit(gelu_forward_and_backward)
args = put(inputs, trn)
out = jax.block_until_ready(step(*args))
run = profile.last_execution(trn)
expected = step(*put(inputs, cpu))
same_bits = all(np.asarray(a).tobytes() == np.asarray(b).tobytes() for a, b in zip(out, expected))
necessary = 4 * inputs[0].nbytes
hbm_bound = necessary / run.peak().hbm_bytes_per_ns
busiest, engine = max((t.busy_ns, name) for name, t in run.streams.items()
                      if not name.startswith("DMA"))
time = run.device_time_ns
print(f"{options.target} bf16 GELU forward + backward over [{options.rows}, {options.cols}]: "
      f"{time / 1e3:.1f} us; {time / busiest:.2f}x the busiest engine ({engine} "
      f"{busiest / 1e3:.1f} us), {time / hbm_bound:.2f}x the HBM bound ({hbm_bound / 1e3:.1f} us); "
      f"the CPU backend's bits: {same_bits}")
print_engines_and_host_execute(run, step, args, put(inputs, cpu), options.repeats)
