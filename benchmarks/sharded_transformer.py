"""A Flax transformer layer's training step (token embedding, causal self-attention, layer norms,
MLP) with the batch sharded over 'data' and the attention heads and MLP hidden units over
'model' (data parallel times Megatron tensor parallel): per core, the modeled device time and
matmul FLOPs, the collectives, and the ops the partitioner ran replicated (docs/multi-device.md
"Partitioning"). The step is checked against JAX's CPU backend on as many host devices.

  python benchmarks/sharded_transformer.py --mesh 4 1 --mesh 2 2
"""

from __future__ import annotations

import argparse
import os
import sys

# The CPU reference needs as many host devices; XLA reads the flag when its backend starts.
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_force_host_platform_device_count=8").strip()

import numpy as np  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402
import flax.linen as nn  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from sharded_mlp import collectives, register_trn  # noqa: E402


VOCAB = 512


class Layer(nn.Module):
  heads: int
  d_model: int

  @nn.compact
  def __call__(self, tokens):
    x = nn.Embed(VOCAB, self.d_model)(tokens)
    mask = nn.make_causal_mask(tokens)
    h = nn.LayerNorm()(x)
    x = x + nn.SelfAttention(num_heads=self.heads, deterministic=True)(h, mask=mask)
    h = nn.LayerNorm()(x)
    return x + nn.Dense(self.d_model)(jax.nn.gelu(nn.Dense(4 * self.d_model)(h)))


def _param_spec(path, leaf) -> P:
  """Megatron: q/k/v and the first dense split their output units over 'model', the output
  projection and the second dense their input units."""
  names = [getattr(k, "key", "") for k in path]
  if leaf.ndim >= 2 and any(n in ("query", "key", "value") for n in names):
    return P(None, "model")
  if leaf.ndim >= 2 and "out" in names:
    return P("model")
  if leaf.ndim == 2 and "Dense_0" in names:
    return P(None, "model")
  if leaf.ndim == 2 and "Dense_1" in names:
    return P("model", None)
  return P()


def sharded_step(devices, mesh_shape, model: Layer, params):
  mesh = Mesh(np.array(devices).reshape(mesh_shape), ("data", "model"))
  specs = jax.tree_util.tree_map_with_path(_param_spec, params)
  param_shardings = jax.tree.map(lambda s: NamedSharding(mesh, s), specs)
  batch = NamedSharding(mesh, P("data"))

  def step(params, x, y):
    def loss(params):
      return jnp.mean((model.apply(params, x) - y) ** 2)
    value, grads = jax.value_and_grad(loss)(params)
    return jax.tree.map(lambda p, g: p - 0.01 * g, params, grads), value
  return jax.jit(step, in_shardings=(param_shardings, batch, batch),
                 out_shardings=(param_shardings, NamedSharding(mesh, P())))


def measure(mesh_shape, batch: int, seq: int, d_model: int, heads: int) -> dict:
  from jax_trn import compilation, profile
  model = Layer(heads=heads, d_model=d_model)
  rng = np.random.default_rng(0)
  x = rng.integers(0, VOCAB, (batch, seq)).astype(np.int32)
  y = rng.standard_normal((batch, seq, d_model), np.float32)
  params = model.init(jax.random.key(0), x)
  cores = int(np.prod(mesh_shape))
  devices = jax.devices("trn")[:cores]
  # The report right after compiling (putting the inputs on the mesh compiles more programs).
  step = sharded_step(devices, mesh_shape, model, params).lower(params, x, y).compile()
  report = compilation.last_report()
  got = jax.block_until_ready(step(params, x, y))
  want = sharded_step(jax.devices("cpu")[:cores], mesh_shape, model, params)(params, x, y)
  for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-3, atol=2e-4)
  runs = [profile.last_execution(d) for d in devices]
  return {"time_us": max(r.device_time_ns for r in runs) / 1e3,
          "flops": max(r.matmul_flops for r in runs), "collectives": collectives(report)}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--mesh", type=int, nargs=2, action="append",
                      help="data x model cores (repeatable; default 4 1 and 2 2)")
  parser.add_argument("--batch", type=int, default=8)
  parser.add_argument("--seq", type=int, default=64)
  parser.add_argument("--d-model", type=int, default=128)
  parser.add_argument("--heads", type=int, default=4)
  args = parser.parse_args()
  register_trn()
  print(f"transformer layer batch {args.batch} seq {args.seq} d_model {args.d_model} "
        f"heads {args.heads}, f32, step = forward + backward + SGD update")
  print(f"{'data x model':<14}{'modeled us/core':>17}{'matmul GFLOP/core':>19}  collectives")
  for shape in [(1, 1)] + [tuple(m) for m in (args.mesh or [(4, 1), (2, 2)])]:
    r = measure(shape, args.batch, args.seq, args.d_model, args.heads)
    print(f"{f'{shape[0]} x {shape[1]}':<14}{r['time_us']:>17.1f}{r['flops'] / 1e9:>19.4f}  "
          f"{r['collectives']}")


if __name__ == "__main__":
  main()
