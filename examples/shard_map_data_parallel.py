"""Data-parallel training with jax.shard_map over a 1-D mesh of every simulated NeuronCore: the
same model, data and optimizer as pmap_data_parallel.py, written the shard_map way. The
parameters and optimizer state are replicated (P()), the batch is split over the mesh axis
(P("cores")), and inside the per-core function the gradients are averaged with lax.pmean (an
all-reduce between the cores). The same global step on one CPU device gives the reference
loss; the two trajectories agree to float rounding. Needs `pip install flax optax`.

    python examples/shard_map_data_parallel.py [steps]
"""

import sys

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import jax_trn
from pmap_data_parallel import loss_fn, model, reference_step, two_spirals, tx, update


def per_core_step(params, opt_state, x, y):
  loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
  grads, loss = jax.lax.pmean((grads, loss), "cores")  # the all-reduce between the cores
  return *update(params, opt_state, grads), loss


def main(steps: int) -> list[tuple[float, float]]:
  devices = jax.devices("trn")
  mesh = Mesh(np.array(devices), ("cores",))
  replicated, split = NamedSharding(mesh, P()), NamedSharding(mesh, P("cores"))
  params = model.init(jax.random.key(0), np.ones((1, 2), np.float32))
  opt_state = tx.init(params)
  trn_state = jax.device_put((params, opt_state), replicated)
  cpu = jax.devices("cpu")[0]
  cpu_state = jax.device_put((params, opt_state), cpu)
  trn_step = jax.jit(jax.shard_map(per_core_step, mesh=mesh,
                                   in_specs=(P(), P(), P("cores"), P("cores")),
                                   out_specs=(P(), P(), P())))
  cpu_step = jax.jit(reference_step)
  rng = np.random.default_rng(0)
  x_train, y_train = two_spirals(4096, rng)
  per_core = 64
  print(f"shard_map data-parallel training on {len(devices)} x {devices[0].device_kind}")
  losses = []
  for step in range(steps):
    batch = rng.integers(0, len(x_train), per_core * len(devices))
    x, y = x_train[batch], y_train[batch]
    *trn_state, trn_loss = trn_step(*trn_state, jax.device_put(x, split),
                                    jax.device_put(y, split))
    jax.block_until_ready(trn_loss)
    modeled = jax_trn.last_execution(devices[0]).device_time_ns / 1e3  # before reading the loss
    *cpu_state, cpu_loss = cpu_step(*cpu_state, jax.device_put(x, cpu), jax.device_put(y, cpu))
    losses.append((float(trn_loss), float(cpu_loss)))
    if step % 25 == 0 or step == steps - 1:
      print(f"step {step:3d}  loss trn {losses[-1][0]:.5f}  cpu {losses[-1][1]:.5f}  "
            f"modeled step time {modeled:.1f} us")
  return losses


if __name__ == "__main__":
  main(int(sys.argv[1]) if len(sys.argv) > 1 else 101)
