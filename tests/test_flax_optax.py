"""A Flax/Optax training script runs unchanged on trn and tracks the CPU backend: Dense, gelu,
LayerNorm, truncated-normal initialisers (jax.random), integer-label cross-entropy (gather and its
scatter-add gradient) and AdamW."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import linen as nn

from cpu_reference import assert_close


class Classifier(nn.Module):
  @nn.compact
  def __call__(self, x):
    x = nn.gelu(nn.Dense(130)(x))
    x = nn.LayerNorm()(x)
    return nn.Dense(10)(x)


def _train(device, steps=8):
  model, tx = Classifier(), optax.adamw(1e-2)
  with jax.default_device(device):
    params = model.init(jax.random.key(0), jnp.ones((1, 70)))
    opt_state = tx.init(params)

    @jax.jit
    def step(params, opt_state, x, y):
      def loss_fn(p):
        logits = model.apply(p, x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
      loss, grads = jax.value_and_grad(loss_fn)(params)
      updates, opt_state = tx.update(grads, opt_state, params)
      return optax.apply_updates(params, updates), opt_state, loss

    rng = np.random.default_rng(0)  # one batch, learned over the steps
    x = jax.device_put(rng.standard_normal((33, 70)).astype(np.float32), device)
    y = jax.device_put(rng.integers(0, 10, 33).astype(np.int32), device)
    losses = []
    for _ in range(steps):
      params, opt_state, loss = step(params, opt_state, x, y)
      losses.append(float(loss))
  return np.array(losses), params


@pytest.mark.slow
def test_flax_adamw_training_matches_cpu(trn, cpu):
  cpu_losses, cpu_params = _train(cpu)
  trn_losses, trn_params = _train(trn)
  assert {a.devices().pop() for a in jax.tree_util.tree_leaves(trn_params)} == {trn}
  # Same initial parameters (threefry is exact), fp32 everywhere: only summation order differs.
  np.testing.assert_allclose(trn_losses, cpu_losses, rtol=1e-5)
  assert trn_losses[-1] < trn_losses[0]
  assert_close(trn_params, cpu_params, scale=100)
