"""Modeled device time of each jax_trn.kernels kernel against the compiler's own lowering of its
plain-JAX reference, on the same shapes, both inside jax.jit on one simulated device (at trn2's
LNC=2, its two physical cores: the library kernels launch over both, the compiler splits ops).

    python benchmarks/nki_kernels.py [--rows 4096] [--hidden 1024] [--gemm 1024] [--seq 2048]
                                     [--dtype bfloat16]

For each kernel: the kernel's and the reference's modeled time, the speed-up, the kernel's
memory-bandwidth utilization (HBM bytes in + out over the device's HBM bound: its share of the
chip's HBM bandwidth, or its cores' DMA rate where lower; 1.0 is the bound, "x bound" its
inverse) and, for the matmul and attention (one head, head dim 128, causal and not), their
TensorE utilization: the model's FLOPs (2MNK; attention 4 S^2 d, half of it causal; recomputed
scores and mask matmuls not counted) over the modeled time and the bf16/fp32 peak of all the
device's cores. Then forward + backward of the differentiable kernels against jax.vjp of their
references, applied to a given output cotangent: softmax (kernels.softmax_backward.softmax: the
forward kernel, and the backward kernel reading its output) and attention
(kernels.flash_attention: the forward kernel with its logsumexp and the backward kernel,
14 S^2 d FLOPs, half causal).
"""

from __future__ import annotations

import argparse
from importlib import metadata

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

import jax_trn
from jax_trn import config, kernels, roofline

if not any(ep.name == "trn" for ep in metadata.entry_points(group="jax_plugins")):
  from jax_trn import plugin
  plugin.initialize()

# TensorE peak per core, FLOP/ns (shared/design/neuroncore.md), by target and input dtype.
PEAK_FLOPS_PER_NS = {"trn1": {"bfloat16": 92e3, "float32": 23e3},
                     "trn2": {"bfloat16": 79e3, "float32": 20e3},
                     "trn3": {"bfloat16": 79e3, "float32": 20e3}}


def modeled_ns(f, args, device) -> tuple[float, jax_trn.ExecutionProfile]:
  """The modeled device time of jit(f)(*args) on `device` (its second run) and its profile."""
  placed = [jax.device_put(a, device) for a in args]
  compiled = jax.jit(f)
  jax.block_until_ready(compiled(*placed))
  jax.block_until_ready(compiled(*placed))
  profile = jax_trn.last_execution(device)
  return profile.device_time_ns, profile


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--rows", type=int, default=4096)
  parser.add_argument("--hidden", type=int, default=1024)
  parser.add_argument("--gemm", type=int, default=1024)
  parser.add_argument("--seq", type=int, default=2048)
  parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
  options = parser.parse_args()
  dtype = np.dtype(ml_dtypes.bfloat16) if options.dtype == "bfloat16" else np.dtype(np.float32)
  device = jax.devices("trn")[0]
  target, cores = config.current().target, config.current().resolved_lnc()
  device_peak = roofline.device_peak(target, cores)
  hbm_bytes_per_ns = min(device_peak.hbm_bytes_per_ns,
                         cores * device_peak.dma_bytes_per_ns_per_core)
  rng = np.random.default_rng(0)

  def normal(*shape):
    return rng.standard_normal(shape).astype(dtype)

  def probabilities(*shape):  # a softmax output
    return np.asarray(jax.nn.softmax(rng.standard_normal(shape), axis=-1)).astype(dtype)

  rows, hidden, n, seq = options.rows, options.hidden, options.gemm, options.seq
  qkv = (normal(1, seq, 128), normal(1, seq, 128), normal(1, seq, 128))
  attention_flops = 4 * seq * seq * 128
  # name -> (library kernel, args, kwargs, output bytes, model FLOPs)
  cases = {
      "rmsnorm": ("rmsnorm", (normal(rows, hidden), normal(hidden)), {}, rows * hidden, 0),
      "layernorm": ("layernorm", (normal(rows, hidden), normal(hidden), normal(hidden)), {},
                    rows * hidden, 0),
      "softmax": ("softmax", (normal(rows, hidden),), {}, rows * hidden, 0),
      "softmax_backward": ("softmax_backward", (probabilities(rows, hidden), normal(rows, hidden)),
                           {}, rows * hidden, 0),
      "matmul_bias_act": ("matmul_bias_act", (normal(n, n), normal(n, n), normal(n)),
                          {"act": "relu"}, n * n, 2 * n ** 3),
      "rotary": ("rotary", (normal(8, seq, 128), normal(seq, 64), normal(seq, 64)), {},
                 8 * seq * 128, 0),
      "attention": ("flash_attention", qkv, {}, seq * 128, attention_flops),
      "attention causal": ("flash_attention", qkv, {"causal": True}, seq * 128,
                           attention_flops // 2),
  }
  peak = PEAK_FLOPS_PER_NS[target][options.dtype] * cores
  print(f"{target} (LNC={cores}: bound {hbm_bytes_per_ns:.0f} GB/s HBM, {peak / 1e3:.0f} "
        f"TFLOPS), {options.dtype}; rows x hidden {rows} x {hidden}, GEMM {n}^3, attention "
        f"seq {seq} head dim 128; modeled times")
  print(f"{'kernel':<19} {'kernel us':>10} {'compiled us':>12} {'speed-up':>9} {'MBU':>6} "
        f"{'x bound':>8} {'TensorE':>8}")
  for name, (library_name, args, kwargs, out_elements, flops) in cases.items():
    kernel, reference = kernels.KERNELS[library_name]
    kernel_ns, _ = modeled_ns(lambda *a: kernel(*a, **kwargs), args, device)
    reference_ns, _ = modeled_ns(lambda *a: reference(*a, **kwargs), args, device)
    moved = sum(a.nbytes for a in args) + out_elements * dtype.itemsize
    mbu = moved / hbm_bytes_per_ns / kernel_ns
    tensor = f"{100 * flops / kernel_ns / peak:7.1f}%" if flops else ""
    print(f"{name:<19} {kernel_ns / 1e3:10.1f} {reference_ns / 1e3:12.1f} "
          f"{reference_ns / kernel_ns:8.2f}x {100 * mbu:5.1f}% {1 / mbu:7.2f}x {tensor:>8}")
  def forward_and_backward(f):
    def run(*args):
      out, pullback = jax.vjp(f, *args[:-1])
      return out, pullback(args[-1])
    return run

  # name -> (differentiable kernel, its reference, args + output cotangent, model FLOPs)
  differentiated = {"softmax fwd+bwd": (kernels.softmax_backward.softmax, kernels.softmax.reference,
                                        (normal(rows, hidden), normal(rows, hidden)), 0)}
  for causal in (False, True):  # attention: forward 4 S^2 d, backward 10 S^2 d
    differentiated["attn fwd+bwd" + (" causal" if causal else "")] = (
        lambda q, k, v, causal=causal: kernels.flash_attention(q, k, v, causal),
        lambda q, k, v, causal=causal: kernels.attention.reference(q, k, v, causal=causal),
        qkv + (normal(1, seq, 128),), 14 * seq * seq * 128 // (2 if causal else 1))
  for name, (kernel, reference, args, flops) in differentiated.items():
    kernel_ns, _ = modeled_ns(forward_and_backward(kernel), args, device)
    reference_ns, _ = modeled_ns(forward_and_backward(reference), args, device)
    tensor = f"{100 * flops / kernel_ns / peak:7.1f}%" if flops else ""
    print(f"{name:<19} {kernel_ns / 1e3:10.1f} {reference_ns / 1e3:12.1f} "
          f"{reference_ns / kernel_ns:8.2f}x {'':>6} {'':>8} {tensor:>8}")


if __name__ == "__main__":
  main()
