"""Data-parallel training with jax.pmap on every simulated NeuronCore of the machine: the
parameters are replicated, each core takes its slice of the batch, and the gradients are
averaged with lax.pmean (an all-reduce between the cores). The same global step on one CPU
device gives the reference loss; the two trajectories agree to float rounding.
Needs `pip install flax optax`.

    python examples/pmap_data_parallel.py [steps]
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import linen as nn

import jax_trn


class MLP(nn.Module):
  @nn.compact
  def __call__(self, x):
    return nn.Dense(2)(nn.gelu(nn.Dense(128)(x)))


def two_spirals(n, rng):
  t = rng.uniform(0.5, 3.5 * np.pi, n)
  label = rng.integers(0, 2, n)
  radius = t / (3.5 * np.pi)
  angle = t + np.pi * label
  x = np.stack([radius * np.cos(angle), radius * np.sin(angle)], 1) + rng.normal(0, 0.02, (n, 2))
  return x.astype(np.float32), label.astype(np.int32)


model, tx = MLP(), optax.adam(3e-3)


def loss_fn(params, x, y):
  return optax.softmax_cross_entropy_with_integer_labels(model.apply(params, x), y).mean()


def update(params, opt_state, grads):
  updates, opt_state = tx.update(grads, opt_state, params)
  return optax.apply_updates(params, updates), opt_state


def parallel_step(params, opt_state, x, y):
  loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
  grads, loss = jax.lax.pmean((grads, loss), "cores")  # the all-reduce between the cores
  return *update(params, opt_state, grads), loss


def reference_step(params, opt_state, x, y):
  loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
  return *update(params, opt_state, grads), loss


def initial_state():
  params = model.init(jax.random.key(0), jnp.ones((1, 2)))
  return params, tx.init(params)


PER_CORE = 64  # examples per core and step


def train(trn_step, trn_state, place, steps: int) -> list[tuple[float, float]]:
  """`steps` steps of `trn_step` from `trn_state` on the trn devices (`place(x, y)` lays the
  global batch out for it) beside the same global steps on one CPU device: [(trn, cpu) loss]."""
  devices = jax.devices("trn")
  cpu = jax.devices("cpu")[0]
  cpu_step, cpu_state = jax.jit(reference_step), jax.device_put(initial_state(), cpu)
  rng = np.random.default_rng(0)
  x_train, y_train = two_spirals(4096, rng)
  losses = []
  for step in range(steps):
    batch = rng.integers(0, len(x_train), PER_CORE * len(devices))
    x, y = x_train[batch], y_train[batch]
    *trn_state, trn_loss = trn_step(*trn_state, *place(x, y))
    jax.block_until_ready(trn_loss)
    modeled = jax_trn.last_execution(devices[0]).device_time_ns / 1e3  # before reading the loss
    *cpu_state, cpu_loss = cpu_step(*cpu_state, jax.device_put(x, cpu), jax.device_put(y, cpu))
    losses.append((float(np.ravel(trn_loss)[0]), float(cpu_loss)))
    if step % 25 == 0 or step == steps - 1:
      print(f"step {step:3d}  loss trn {losses[-1][0]:.5f}  cpu {losses[-1][1]:.5f}  "
            f"modeled step time {modeled:.1f} us")
  return losses


def main(steps: int) -> list[tuple[float, float]]:
  devices = jax.devices("trn")
  n = len(devices)
  # Every core holds the parameters: a leading axis of n copies, pmap's layout.
  replicate = lambda tree: jax.tree.map(lambda a: np.broadcast_to(a, (n, *a.shape)), tree)
  trn_step = jax.pmap(parallel_step, axis_name="cores", devices=devices)
  print(f"data-parallel training on {n} x {devices[0].device_kind}")
  return train(trn_step, replicate(initial_state()),
               lambda x, y: (x.reshape(n, PER_CORE, 2), y.reshape(n, PER_CORE)), steps)


if __name__ == "__main__":
  main(int(sys.argv[1]) if len(sys.argv) > 1 else 101)
