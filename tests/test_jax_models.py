"""Model building blocks through JAX on trn against the CPU backend: softmax, layer norm, and a
2-layer MLP (forward, jax.grad, and 20 SGD steps whose loss trajectory must match CPU)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cpu_reference import assert_close, assert_matches_cpu, on_device


def layer_norm(x, gamma, beta, eps=1e-5):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) * jax.lax.rsqrt(var + eps) * gamma + beta


def init_mlp(seed, n_in=200, n_hidden=300, n_out=10):
  rng = np.random.default_rng(seed)
  return {
      "w1": (rng.standard_normal((n_in, n_hidden)) / np.sqrt(n_in)).astype(np.float32),
      "b1": np.zeros((n_hidden,), np.float32),
      "w2": (rng.standard_normal((n_hidden, n_out)) / np.sqrt(n_hidden)).astype(np.float32),
      "b2": np.zeros((n_out,), np.float32),
  }


def mlp(params, x):
  h = jax.nn.relu(x @ params["w1"] + params["b1"])
  return h @ params["w2"] + params["b2"]


def loss(params, x, y):
  return jnp.mean((mlp(params, x) - y) ** 2)


@jax.jit
def sgd_step(params, x, y):
  value, grads = jax.value_and_grad(loss)(params, x, y)
  return jax.tree_util.tree_map(lambda p, g: p - 0.05 * g, params, grads), value


def _batch(seed, n=130, n_in=200, n_out=10):
  rng = np.random.default_rng(seed)
  return (rng.standard_normal((n, n_in)).astype(np.float32),
          rng.standard_normal((n, n_out)).astype(np.float32))


@pytest.mark.parametrize("shape,axis", (((129, 257), -1), ((4, 130, 33), 1)))
def test_softmax(shape, axis, trn, cpu):
  x = np.random.default_rng(0).standard_normal(shape).astype(np.float32) * 4
  assert_matches_cpu(lambda v: jax.nn.softmax(v, axis=axis), x, trn=trn, cpu=cpu, scale=8)


def test_layer_norm(trn, cpu):
  rng = np.random.default_rng(1)
  x = rng.standard_normal((130, 384)).astype(np.float32)
  gamma, beta = rng.standard_normal((2, 384)).astype(np.float32)
  assert_matches_cpu(layer_norm, x, gamma, beta, trn=trn, cpu=cpu, scale=16)


def test_mlp_forward_and_grad(trn, cpu):
  params = init_mlp(2)
  x, y = _batch(3)
  assert_matches_cpu(mlp, params, x, trn=trn, cpu=cpu, scale=40)
  assert_matches_cpu(jax.grad(loss), params, x, y, trn=trn, cpu=cpu, scale=200)


def test_mlp_sgd_loss_trajectory(trn, cpu):
  """20 SGD steps: fp32 matmuls and sums differ from CPU only by summation order, so every loss
  agrees to ~1e-5 relative and both trajectories decrease the same way."""
  trajectories = {}
  for name, device in (("cpu", cpu), ("trn", trn)):
    params = jax.device_put(init_mlp(4), device)
    losses = []
    for step in range(20):
      x, y = jax.device_put(_batch(100 + step), device)
      params, value = sgd_step(params, x, y)
      losses.append(float(value))
    trajectories[name] = (np.array(losses), params)
  cpu_losses, cpu_params = trajectories["cpu"]
  trn_losses, trn_params = trajectories["trn"]
  np.testing.assert_allclose(trn_losses, cpu_losses, rtol=1e-4)
  assert trn_losses[-1] < trn_losses[0]
  assert_close(trn_params, cpu_params, scale=500)
