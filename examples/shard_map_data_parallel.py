"""Data-parallel training with jax.shard_map over a 1-D mesh of every simulated NeuronCore: the
same model, data and optimizer as pmap_data_parallel.py, written the shard_map way. The
parameters and optimizer state are replicated (P()), the batch is split over the mesh axis
(P("cores")), and the per-core step (pmap_data_parallel.py's) averages the gradients with
lax.pmean (an all-reduce between the cores). The same global step on one CPU device gives the
reference loss; the two trajectories agree to float rounding. Needs `pip install flax optax`.

    python examples/shard_map_data_parallel.py [steps]
"""

import sys

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

# parallel_step averages the gradients with lax.pmean over "cores": under shard_map that is
# the mesh axis, as under pmap it is pmap's axis.
from pmap_data_parallel import initial_state, parallel_step, train


def main(steps: int) -> list[tuple[float, float]]:
  devices = jax.devices("trn")
  mesh = Mesh(np.array(devices), ("cores",))
  replicated, split = NamedSharding(mesh, P()), NamedSharding(mesh, P("cores"))
  trn_step = jax.jit(jax.shard_map(parallel_step, mesh=mesh,
                                   in_specs=(P(), P(), P("cores"), P("cores")),
                                   out_specs=(P(), P(), P())))
  print(f"shard_map data-parallel training on {len(devices)} x {devices[0].device_kind}")
  return train(trn_step, jax.device_put(initial_state(), replicated),
               lambda x, y: (jax.device_put(x, split), jax.device_put(y, split)), steps)


if __name__ == "__main__":
  main(int(sys.argv[1]) if len(sys.argv) > 1 else 101)
