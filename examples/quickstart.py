"""jax-trn in one page: the simulated NeuronCores, a jitted function checked against NumPy, an
eager sequence, and what the chip would have spent on each engine.

    python examples/quickstart.py
"""

import jax
import jax.numpy as jnp
import numpy as np

import jax_trn

devices = jax.devices("trn")
print(f"{len(devices)} trn devices:")
for d in devices:
  print(f"  {d}  kind={d.device_kind!r}  chip={d.chip_index}  core={d.core_on_chip}")


@jax.jit
def layer(x, w, b):
  return jax.nn.relu(x @ w + b)


rng = np.random.default_rng(0)
x = rng.standard_normal((200, 300), np.float32)
w = rng.standard_normal((300, 150), np.float32) / np.sqrt(300)
b = rng.standard_normal((150,), np.float32)

y = layer(x, w, b)
expected = np.maximum(x @ w + b, 0)
np.testing.assert_allclose(np.asarray(y), expected, rtol=1e-4, atol=1e-4)
print(f"\njit: relu(x @ w + b) on {y.devices()} matches NumPy, shape {y.shape}")
print(jax_trn.last_execution(devices[0]).format())

report = jax_trn.compile_report()
print(f"\ncompile report of the last program:\n{report}")

a = jnp.arange(12.0).reshape(3, 4)
c = jnp.exp(a / 10) * 2 - 1
d = c.sum(axis=0)
np.testing.assert_allclose(np.asarray(d), (np.exp(np.arange(12.0).reshape(3, 4) / 10) * 2 - 1).sum(0),
                           rtol=1e-5)
print(f"\neager: exp(a / 10) * 2 - 1 summed over rows = {np.asarray(d)}")
print(jax_trn.last_execution(devices[0]).format())
