"""A pre-norm transformer block whose hot ops are jax_trn.kernels NKI kernels (RMSNorm, flash
attention, fused matmul + bias + SiLU), inside one jax.jit, checked against the same block in
plain JAX, with the modeled device time of each.

    python examples/nki_transformer_block.py [--seq 512]
"""

import argparse
from importlib import metadata

import jax
import ml_dtypes
import numpy as np

import jax_trn
from jax_trn import kernels

if not any(ep.name == "trn" for ep in metadata.entry_points(group="jax_plugins")):
  from jax_trn import plugin  # a source tree built in place has no entry point
  plugin.initialize()

D_MODEL, HEADS, KV_HEADS, D_FF = 512, 4, 2, 1024
HEAD_DIM = D_MODEL // HEADS


def block(params, x, norm, attention, dense):
  """x [S, D] -> x + attention(norm(x)) -> + mlp(norm(.)); the three ops are arguments."""
  seq = x.shape[0]
  h = norm(x, params["norm1"])
  q = dense(h, params["wq"], params["bq"], "none").reshape(seq, HEADS, HEAD_DIM)
  kv = dense(h, params["wkv"], params["bkv"], "none").reshape(seq, 2, KV_HEADS, HEAD_DIM)
  heads = attention(q.transpose(1, 0, 2), kv[:, 0].transpose(1, 0, 2),
                    kv[:, 1].transpose(1, 0, 2))
  x = x + dense(heads.transpose(1, 0, 2).reshape(seq, D_MODEL), params["wo"], params["bo"], "none")
  h = norm(x, params["norm2"])
  return x + dense(dense(h, params["w1"], params["b1"], "silu"), params["w2"], params["b2"], "none")


def with_kernels(params, x):
  return block(params, x, kernels.rmsnorm.rmsnorm_kernel,
               lambda q, k, v: kernels.attention.flash_attention_kernel(q, k, v, causal=True),
               lambda a, w, b, act: kernels.matmul_bias_act.matmul_bias_act_kernel(a, w, b, act=act))


def plain(params, x):
  return block(params, x, kernels.rmsnorm.reference,
               lambda q, k, v: kernels.attention.reference(q, k, v, causal=True),
               kernels.matmul_bias_act.reference)


def init(rng, dtype):
  def dense(n_in, n_out):
    return (rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(dtype), \
        np.zeros((n_out,), dtype)
  params = {"norm1": np.ones((D_MODEL,), dtype), "norm2": np.ones((D_MODEL,), dtype)}
  for name, (n_in, n_out) in {"q": (D_MODEL, D_MODEL), "kv": (D_MODEL, 2 * KV_HEADS * HEAD_DIM),
                              "o": (D_MODEL, D_MODEL), "1": (D_MODEL, D_FF),
                              "2": (D_FF, D_MODEL)}.items():
    params[f"w{name}"], params[f"b{name}"] = dense(n_in, n_out)
  return params


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--seq", type=int, default=512)
  seq = parser.parse_args().seq
  rng = np.random.default_rng(0)
  dtype = ml_dtypes.bfloat16
  trn = jax.devices("trn")[0]
  params = jax.device_put(init(rng, dtype), trn)
  x = jax.device_put(rng.standard_normal((seq, D_MODEL)).astype(dtype), trn)
  results = {}
  for name, f in (("NKI kernels", with_kernels), ("plain JAX", plain)):
    compiled = jax.jit(f)
    compiled(params, x).block_until_ready()
    results[name] = np.asarray(compiled(params, x)).astype(np.float32)
    print(f"{name:<12} modeled device time {jax_trn.last_execution(trn).device_time_ns / 1e3:9.1f} us")
  error = np.abs(results["NKI kernels"] - results["plain JAX"]).max()
  print(f"largest difference between the two: {error:.3g} (bf16)")


if __name__ == "__main__":
  main()
