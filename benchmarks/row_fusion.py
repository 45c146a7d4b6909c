"""Softmax and layernorm against the HBM-bandwidth lower bound, with and without fuse-rows (issue 7).

    TRN_PROFILE=1 python benchmarks/row_fusion.py [--target trn2] [--unfused]

Runs softmax over f32[4096, 4096] and compile_and_execute.py's layer norm over [16384, 1024] in
f32 and bf16 on one JAX device and prints the modeled time, the HBM traffic, the necessary bytes
(inputs read once, the output written once) and the bound: necessary bytes over the device's
HBM bandwidth, and over what one core's DMA engines move (on an LNC=2 device the rows are split
between its two physical cores, so the device can beat one core's bound).
`--unfused` drops the fuse-rows pass (the code generation before it).
"""

from __future__ import annotations

import argparse
import os

import jax
import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("--target", default=os.environ.get("TRN_TARGET", "trn2"))
parser.add_argument("--unfused", action="store_true")
options = parser.parse_args()
os.environ["TRN_TARGET"] = options.target
os.environ["TRN_PROFILE"] = "1"
os.environ["TRN_CACHE_DIR"] = ""

from compile_and_execute import _layer_norm  # noqa: E402
from hlo_lowering import pipeline  # noqa: E402
from jax_trn import plugin, profile  # noqa: E402

plugin.initialize()
if options.unfused:
  pipeline.PASSES = tuple(p for p in pipeline.PASSES if p.name != "fuse-rows")


def _measure(name: str, f, *args) -> None:
  device = jax.devices("trn")[0]
  args = [jax.device_put(a, device) for a in args]
  out = jax.block_until_ready(jax.jit(f)(*args))
  run = profile.last_execution(device)
  necessary = sum(a.nbytes for a in args) + out.nbytes
  peak = run.peak()
  hbm_bound = necessary / peak.hbm_bytes_per_ns
  dma_bound = necessary / peak.dma_bytes_per_ns_per_core
  time = run.device_time_ns
  print(f"{options.target} {'unfused' if options.unfused else 'fused'} {name}: {time / 1e3:.1f} us, "
        f"HBM {run.hbm_bytes / 1e6:.1f} MB (necessary {necessary / 1e6:.1f} MB); "
        f"{time / hbm_bound:.2f}x the HBM bound ({hbm_bound / 1e3:.1f} us), "
        f"{time / dma_bound:.2f}x one core's DMA bound ({dma_bound / 1e3:.1f} us); "
        f"MBU {100 * run.device_utilization().mbu:.1f} %")


rng = np.random.default_rng(0)
_measure("softmax f32[4096, 4096]", lambda x: jax.nn.softmax(x, axis=-1),
         rng.standard_normal((4096, 4096), np.float32))
for dtype in (np.float32, jax.numpy.bfloat16):
  x = rng.standard_normal((16384, 1024), np.float32).astype(dtype)
  scale = rng.standard_normal((1024,), np.float32).astype(dtype)
  _measure(f"layer norm {np.dtype(dtype).name}[16384, 1024]", _layer_norm, x, scale)
