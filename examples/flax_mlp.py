"""An ordinary Flax/Optax training script, unchanged: with jax-trn installed, trn is the default
backend, so it trains on a simulated NeuronCore. Needs `pip install flax optax`.

    python examples/flax_mlp.py
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import linen as nn

import jax_trn


class MLP(nn.Module):
  hidden: int = 256

  @nn.compact
  def __call__(self, x):
    x = nn.gelu(nn.Dense(self.hidden)(x))
    x = nn.LayerNorm()(x)
    return nn.Dense(2)(x)


def two_spirals(n, rng):
  """A classic non-linearly separable toy set."""
  t = rng.uniform(0.5, 3.5 * np.pi, n)
  label = rng.integers(0, 2, n)
  radius = t / (3.5 * np.pi)
  angle = t + np.pi * label
  x = np.stack([radius * np.cos(angle), radius * np.sin(angle)], 1) + rng.normal(0, 0.02, (n, 2))
  return x.astype(np.float32), label.astype(np.int32)


model, tx = MLP(), optax.adam(3e-3)
params = model.init(jax.random.key(0), jnp.ones((1, 2)))
opt_state = tx.init(params)


@jax.jit
def train_step(params, opt_state, x, y):
  def loss_fn(p):
    return optax.softmax_cross_entropy_with_integer_labels(model.apply(p, x), y).mean()
  loss, grads = jax.value_and_grad(loss_fn)(params)
  updates, opt_state = tx.update(grads, opt_state, params)
  return optax.apply_updates(params, updates), opt_state, loss


rng = np.random.default_rng(0)
x_train, y_train = two_spirals(2048, rng)
print(f"training on {jax.devices()[0]} ({jax.devices()[0].device_kind})")
for step in range(301):
  batch = rng.integers(0, len(x_train), 256)
  params, opt_state, loss = train_step(params, opt_state, x_train[batch], y_train[batch])
  if step % 50 == 0:
    modeled = jax_trn.last_execution().device_time_ns / 1e3
    print(f"step {step:3d}  loss {float(loss):.4f}  modeled device time per step {modeled:.1f} us")

x_test, y_test = two_spirals(1024, rng)
accuracy = float((model.apply(params, x_test).argmax(-1) == y_test).mean())
print(f"test accuracy {accuracy:.3f}")
