"""Compile and execute figures of issue 6's programs, measured in one run against the JAX CPU
backend.

    python benchmarks/compile_and_execute.py [--seq 512] [--repeats 3] [--size-seqs 512,2048,8192]
                                             [--size-timeout 300] [--skip-execute]

For a transformer block fwd+bwd (d_model 1024, 16 heads, bf16, causal attention written the plain
JAX way; `--seq 2048` for the issue's figure), a 4-layer GPT AdamW training step (d 256, T 128,
B 8; optax.adamw) and a 1024^3 GEMM in bf16 and fp32, prints for trn and cpu and their ratio:
cold compile (an empty TRN_CACHE_DIR, a fresh jit), cached compile in a new process (a subprocess
with the same cache dir; CPU: a fresh-process compile; also its `Lowered.compile()` part alone,
without JAX's tracing and lowering) and steady-state host execute time. Then
the transformer block's program size (bytes, instructions) at each `--size-seqs` length: compile
only, each in its own process under `--size-timeout` seconds (a length that runs past it is
reported as such). Prints the host's CPU model and core count first.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile

import jax
import jax.numpy as jnp
import numpy as np
import optax

import jax_trn
from foundation import cold_compile_s, put, steady_execute_s

D_MODEL, HEADS = 1024, 16
GPT_LAYERS, GPT_D, GPT_T, GPT_B, GPT_HEADS, GPT_VOCAB = 4, 256, 128, 8, 4, 256


# --- the programs -------------------------------------------------------------------------------

def _layer_norm(x, scale):
  mean = jnp.mean(x, axis=-1, keepdims=True)
  var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
  return (x - mean) * jax.lax.rsqrt(var + 1e-5) * scale


def _causal_attention(x, wqkv, wo, heads):
  b, t, d = x.shape
  q, k, v = jnp.split(x @ wqkv, 3, axis=-1)
  split = lambda a: a.reshape(b, t, heads, d // heads).transpose(0, 2, 1, 3)
  q, k, v = split(q), split(k), split(v)
  scores = (q @ k.transpose(0, 1, 3, 2)) / np.sqrt(d // heads).astype(x.dtype)
  mask = jnp.tril(jnp.ones((t, t), bool))
  scores = jnp.where(mask, scores, jnp.asarray(-1e9, scores.dtype))
  attn = jax.nn.softmax(scores.astype(jnp.float32), axis=-1).astype(x.dtype)
  out = (attn @ v).transpose(0, 2, 1, 3).reshape(b, t, d)
  return out @ wo


def _block(params, x, heads):
  x = x + _causal_attention(_layer_norm(x, params["ln1"]), params["wqkv"], params["wo"], heads)
  h = jax.nn.gelu(_layer_norm(x, params["ln2"]) @ params["w1"])
  return x + h @ params["w2"]


def _block_params(rng: np.random.Generator, d: int, dtype) -> dict:
  w = lambda *shape: (rng.standard_normal(shape, np.float32) / np.sqrt(shape[0])).astype(dtype)
  return {"ln1": np.ones((d,), dtype), "ln2": np.ones((d,), dtype), "wqkv": w(d, 3 * d),
          "wo": w(d, d), "w1": w(d, 4 * d), "w2": w(4 * d, d)}


def block_fwd_bwd(params, x):
  """Gradients of a transformer block's summed output w.r.t. its parameters and input."""
  loss = lambda p, x: jnp.sum(_block(p, x, HEADS).astype(jnp.float32))
  return jax.grad(loss, argnums=(0, 1))(params, x)


def block_inputs(seq: int) -> tuple:
  rng = np.random.default_rng(0)
  x = rng.standard_normal((1, seq, D_MODEL), np.float32).astype(jnp.bfloat16)
  return _block_params(rng, D_MODEL, jnp.bfloat16), x


_ADAMW = optax.adamw(1e-3)


def _gpt_loss(params, tokens, targets):
  x = params["embed"][tokens] + params["pos"]
  for layer in params["layers"]:
    x = _block(layer, x, GPT_HEADS)
  logits = _layer_norm(x, params["ln_f"]) @ params["embed"].T
  return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, targets))


def gpt_step(params, opt_state, tokens, targets):
  """One AdamW training step of a 4-layer GPT."""
  loss, grads = jax.value_and_grad(_gpt_loss)(params, tokens, targets)
  updates, opt_state = _ADAMW.update(grads, opt_state, params)
  return optax.apply_updates(params, updates), opt_state, loss


def gpt_inputs() -> tuple:
  rng = np.random.default_rng(0)
  params = {"embed": rng.standard_normal((GPT_VOCAB, GPT_D), np.float32) * 0.02,
            "pos": rng.standard_normal((GPT_T, GPT_D), np.float32) * 0.02,
            "ln_f": np.ones((GPT_D,), np.float32),
            "layers": [_block_params(rng, GPT_D, np.float32) for _ in range(GPT_LAYERS)]}
  tokens = rng.integers(0, GPT_VOCAB, (GPT_B, GPT_T), np.int32)
  targets = rng.integers(0, GPT_VOCAB, (GPT_B, GPT_T), np.int32)
  return params, _ADAMW.init(params), tokens, targets


def gemm(a, b):
  return a @ b


def gemm_inputs(dtype_name: str) -> tuple:
  rng = np.random.default_rng(0)
  dtype = jnp.bfloat16 if dtype_name == "bf16" else np.float32
  return tuple(rng.standard_normal((1024, 1024), np.float32).astype(dtype) for _ in range(2))


def programs(seq: int) -> dict:
  """name -> (function, inputs); the same in this process and in the cached-compile child."""
  return {
      f"transformer block fwd+bwd, seq {seq}": (block_fwd_bwd, block_inputs(seq)),
      "4-layer GPT AdamW step": (gpt_step, gpt_inputs()),
      "GEMM 1024^3 bf16": (gemm, gemm_inputs("bf16")),
      "GEMM 1024^3 fp32": (gemm, gemm_inputs("fp32")),
  }


# --- measurements -------------------------------------------------------------------------------

# Run in a fresh process: the cached compile of every program, as a researcher's next script sees
# it. It imports this file as `compile_and_execute`, so source locations (the cache key) match.
_CACHED_COMPILE_CHILD = """
import json, sys
sys.path[:0] = json.loads(sys.argv[1])
from importlib import metadata
import jax
if not any(ep.name == "trn" for ep in metadata.entry_points(group="jax_plugins")):
  from jax_trn import plugin
  plugin.initialize()
from compile_and_execute import programs
from foundation import lower_and_compile_s, put
from jax_trn import compilation
out = {}
for name, (fn, args) in programs(int(sys.argv[2])).items():
  out[name] = {p: lower_and_compile_s(fn, put(args, jax.devices(p)[0])) for p in ("trn", "cpu")}
out["stats"] = compilation.cache_stats()
print(json.dumps(out))
"""


def _child_paths() -> list[str]:
  return [os.path.dirname(os.path.abspath(__file__))] + [p for p in sys.path if p]


def fresh_process_compile_s(cache_dir: str, seq: int) -> dict:
  env = {**os.environ, "TRN_CACHE_DIR": cache_dir}
  result = subprocess.run([sys.executable, "-c", _CACHED_COMPILE_CHILD, json.dumps(_child_paths()),
                           str(seq)], capture_output=True, text=True, env=env, check=True)
  return json.loads(result.stdout.strip().splitlines()[-1])


# Run in a fresh process: compile (only) the transformer block at one length, no cache.
_PROGRAM_SIZE_CHILD = """
import json, sys, time
sys.path[:0] = json.loads(sys.argv[1])
import jax
from compile_and_execute import block_fwd_bwd, block_inputs
from hlo_lowering.program.reader import read_program
from jax_trn import compilation
seq = int(sys.argv[2])
start = time.perf_counter()
text = jax.jit(block_fwd_bwd).lower(*block_inputs(seq)).as_text()
program = compilation.compile_text(text)
seconds = time.perf_counter() - start
instructions = sum(len(block.instructions) for block in read_program(program).blocks)
print(json.dumps({"bytes": len(program), "instructions": instructions, "seconds": seconds}))
"""


def program_size(seq: int, timeout_s: float) -> dict | None:
  """The transformer block's program at `seq`: bytes, instructions, lower+compile seconds; None
  when the compile runs past `timeout_s`."""
  try:
    result = subprocess.run([sys.executable, "-c", _PROGRAM_SIZE_CHILD,
                             json.dumps(_child_paths()), str(seq)],
                            capture_output=True, text=True, check=True, timeout=timeout_s,
                            env={**os.environ, "TRN_CACHE_DIR": ""})
  except subprocess.TimeoutExpired:
    return None
  return json.loads(result.stdout.strip().splitlines()[-1])


def cpu_model() -> str:
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"):
          return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or platform.machine()


def row(name: str, trn: float, cpu: float, unit: str = "s", scale: float = 1.0) -> None:
  print(f"{name:<58} trn {trn * scale:9.3f} {unit}   cpu {cpu * scale:9.3f} {unit}   "
        f"trn/cpu {trn / cpu:7.2f}", flush=True)


def _register_trn() -> None:
  # An installed jax-trn registers itself through its entry point; a source checkout does not.
  from importlib import metadata
  if not any(ep.name == "trn" for ep in metadata.entry_points(group="jax_plugins")):
    from jax_trn import plugin
    plugin.initialize()


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--seq", type=int, default=512, help="transformer block sequence length")
  parser.add_argument("--repeats", type=int, default=3, help="executions timed per program")
  parser.add_argument("--size-seqs", default="512,2048,8192",
                      help="sequence lengths of the program-size curve ('' to skip)")
  parser.add_argument("--size-timeout", type=float, default=300.0,
                      help="seconds allowed per program-size compile")
  parser.add_argument("--skip-execute", action="store_true", help="compile figures only")
  args = parser.parse_args()

  _register_trn()
  trn, cpu = jax.devices("trn")[0], jax.devices("cpu")[0]
  print(f"jax-trn {jax_trn.__version__}, {trn.device_kind}; jax {jax.__version__}")
  print(f"host: {cpu_model()}, {os.cpu_count()} cores")
  cases = programs(args.seq)

  own_cache = tempfile.mkdtemp(prefix="jax-trn-bench-cache-")
  try:
    # An empty persistent cache for this process, so the cold compile really compiles.
    os.environ["TRN_CACHE_DIR"] = own_cache
    for name, (fn, inputs) in cases.items():
      row(f"cold compile, {name}", cold_compile_s(fn, put(inputs, trn)),
          cold_compile_s(fn, put(inputs, cpu)))
  finally:
    shutil.rmtree(own_cache, True)

  with tempfile.TemporaryDirectory() as cache_dir:
    fresh_process_compile_s(cache_dir, args.seq)  # fills the cache (misses)
    cached = fresh_process_compile_s(cache_dir, args.seq)
  stats = cached.pop("stats")
  for name, times in cached.items():
    row(f"cached compile, new process, {name}", sum(times["trn"]), sum(times["cpu"]))
    # What the persistent cache serves, without JAX's tracing and lowering (the same for both).
    row("  of which Lowered.compile()", times["trn"][1], times["cpu"][1])
  print(f"  (cache in the second process: {stats['hits']} hits, {stats['misses']} misses)")

  if not args.skip_execute:
    for name, (fn, inputs) in cases.items():
      row(f"execute, {name}", steady_execute_s(jax.jit(fn), put(inputs, trn), args.repeats),
          steady_execute_s(jax.jit(fn), put(inputs, cpu), args.repeats), unit="ms", scale=1e3)

  seqs = [int(s) for s in args.size_seqs.split(",") if s]
  if seqs:
    print("transformer block fwd+bwd program size (compile only, one process each):")
  sizes = {}
  for seq in seqs:
    size = program_size(seq, args.size_timeout)
    if size is None:
      print(f"  seq {seq:6d}: compile ran past {args.size_timeout:.0f} s, not measured", flush=True)
      continue
    sizes[seq] = size
    print(f"  seq {seq:6d}: {size['bytes']:12,d} bytes  {size['instructions']:9,d} instructions  "
          f"lower+compile {size['seconds']:7.2f} s", flush=True)
  if len(sizes) >= 2:
    lo, hi = min(sizes), max(sizes)
    print(f"  growth seq {lo} -> {hi}: {sizes[hi]['bytes'] / sizes[lo]['bytes']:.1f}x bytes "
          f"(target < 2x over 512 -> 8192)")


if __name__ == "__main__":
  main()
