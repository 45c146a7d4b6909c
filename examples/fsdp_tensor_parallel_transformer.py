"""FSDP + tensor-parallel training of a small Flax transformer language model with sharded
jax.jit, on a (data × model) mesh of simulated NeuronCores (2 × 2: the four devices of one trn2
chip at LNC=2).

- Batch: split over "data" (data parallel).
- Weights, Megatron style over "model": attention heads and the MLP's hidden units are split,
  so the query/key/value and first MLP projections are column-parallel and the attention output
  and second MLP projections row-parallel.
- FSDP over "data": each weight's other large dim is split over "data" too, so no core holds a
  whole weight; the partitioner gathers a weight where it is used and reduce-scatters its
  gradient. AdamW's moments follow their parameters' shardings.

The same step on one CPU device gives the reference loss; the two trajectories agree to float
rounding (the partitioned program sums in another order). Needs `pip install flax optax`.

    python examples/fsdp_tensor_parallel_transformer.py [steps]
"""

import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import jax_trn

VOCAB, D_MODEL, HEADS, LAYERS, SEQ, BATCH = 256, 128, 4, 2, 32, 8


class Block(nn.Module):
  @nn.compact
  def __call__(self, x, mask):
    x = x + nn.MultiHeadDotProductAttention(num_heads=HEADS, deterministic=True)(
        nn.LayerNorm()(x), mask=mask)
    h = nn.Dense(4 * D_MODEL, name="up")(nn.LayerNorm()(x))
    return x + nn.Dense(D_MODEL, name="down")(jax.nn.gelu(h))


class LanguageModel(nn.Module):
  @nn.compact
  def __call__(self, tokens):
    x = nn.Embed(VOCAB, D_MODEL)(tokens)
    mask = nn.make_causal_mask(tokens)
    for _ in range(LAYERS):
      x = Block()(x, mask)
    return nn.Dense(VOCAB, name="head")(nn.LayerNorm()(x))


def param_spec(path, leaf) -> P:
  """Where each parameter lives: heads and hidden units over "model" (Megatron), the model
  dim of every weight over "data" (FSDP); layer norms and small biases replicated."""
  names = {getattr(k, "key", "") for k in path}
  kernel = "kernel" in names
  if names & {"query", "key", "value"}:  # [d_model, heads, head_dim] and [heads, head_dim]
    return P("data", "model", None) if kernel else P("model", None)
  if "out" in names:                     # [heads, head_dim, d_model]
    return P("model", None, "data") if kernel else P()
  if "up" in names:                      # [d_model, 4 d_model]
    return P("data", "model") if kernel else P("model")
  if "down" in names:                    # [4 d_model, d_model]
    return P("model", "data") if kernel else P()
  if "head" in names:                    # [d_model, vocab]
    return P("data", "model") if kernel else P("model")
  if "embedding" in names:               # [vocab, d_model]
    return P(None, "data")
  return P()


model, tx = LanguageModel(), optax.adamw(3e-3, weight_decay=0.01)


def train_step(params, opt_state, tokens):
  def loss_fn(params):
    logits = model.apply(params, tokens[:, :-1])
    return optax.softmax_cross_entropy_with_integer_labels(logits, tokens[:, 1:]).mean()
  loss, grads = jax.value_and_grad(loss_fn)(params)
  updates, opt_state = tx.update(grads, opt_state, params)
  return optax.apply_updates(params, updates), opt_state, loss


def batches(rng):
  """Token sequences with a learnable rule: each continues an arithmetic progression mod VOCAB."""
  while True:
    start = rng.integers(0, VOCAB, (BATCH, 1))
    stride = rng.integers(1, 8, (BATCH, 1))
    yield ((start + stride * np.arange(SEQ + 1)) % VOCAB).astype(np.int32)


def main(steps: int) -> list[tuple[float, float]]:
  devices = jax.devices("trn")[:4]
  mesh = Mesh(np.array(devices).reshape(2, 2), ("data", "model"))
  params = model.init(jax.random.key(0), np.zeros((BATCH, SEQ), np.int32))
  opt_state = tx.init(params)
  shardings = jax.tree.map(lambda s: NamedSharding(mesh, s),
                           jax.tree_util.tree_map_with_path(param_spec, params))
  # AdamW's moments are trees shaped like the parameters: the same shardings; counts replicated.
  opt_shardings = optax.tree_utils.tree_map_params(
      tx, lambda _, sharding: sharding, opt_state, shardings,
      transform_non_params=lambda _: NamedSharding(mesh, P()))
  data = NamedSharding(mesh, P("data"))
  trn_step = jax.jit(train_step, in_shardings=(shardings, opt_shardings, data),
                     out_shardings=(shardings, opt_shardings, NamedSharding(mesh, P())))
  trn_state = (jax.device_put(params, shardings), jax.device_put(opt_state, opt_shardings))
  cpu = jax.devices("cpu")[0]
  cpu_step = jax.jit(train_step)
  cpu_state = jax.device_put((params, opt_state), cpu)
  print(f"FSDP x tensor-parallel training on a 2 x 2 mesh of {devices[0].device_kind}")
  losses = []
  for step, tokens in zip(range(steps), batches(np.random.default_rng(0))):
    *trn_state, trn_loss = trn_step(*trn_state, jax.device_put(tokens, data))
    jax.block_until_ready(trn_loss)
    modeled = jax_trn.last_execution(devices[0]).device_time_ns / 1e3
    *cpu_state, cpu_loss = cpu_step(*cpu_state, jax.device_put(tokens, cpu))
    losses.append((float(trn_loss), float(cpu_loss)))
    if step % 10 == 0 or step == steps - 1:
      print(f"step {step:3d}  loss trn {losses[-1][0]:.5f}  cpu {losses[-1][1]:.5f}  "
            f"modeled step time {modeled:.1f} us")
  return losses


if __name__ == "__main__":
  main(int(sys.argv[1]) if len(sys.argv) > 1 else 41)
