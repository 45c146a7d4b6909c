"""Eager (op-by-op) execution on trn, and reuse of compiled programs for repeated signatures."""

import jax
import jax.numpy as jnp
import numpy as np

from jax_trn import compilation


def test_eager_sequence_matches_numpy(trn):
  a_host = np.arange(12.0, dtype=np.float32).reshape(3, 4)
  a = jax.device_put(a_host, trn)
  b = jnp.exp(a / 10) * 2 - 1
  c = b.sum(axis=0)
  d = jnp.maximum(c, 5.0).astype(jnp.int32)
  assert d.devices() == {trn}
  expected = np.maximum((np.exp(a_host / 10) * 2 - 1).sum(0), 5.0).astype(np.int32)
  np.testing.assert_array_equal(np.asarray(d), expected)


def test_repeated_signatures_reuse_programs(trn):
  def step(v):
    return v * 3 + 1

  x = jax.device_put(np.ones((5, 7), np.float32), trn)
  start = compilation.compile_count()
  step(x)
  assert compilation.compile_count() > start  # new signatures compile
  warmed = compilation.compile_count()
  for _ in range(5):
    y = step(x)
  assert compilation.compile_count() == warmed
  z = step(jax.device_put(np.ones((6, 7), np.float32), trn))  # a new shape compiles again
  assert compilation.compile_count() > warmed
  np.testing.assert_array_equal(np.asarray(y), np.full((5, 7), 4, np.float32))
  np.testing.assert_array_equal(np.asarray(z), np.full((6, 7), 4, np.float32))


def test_jit_compiles_once_per_signature(trn):
  f = jax.jit(lambda v: jnp.tanh(v) + 1)
  x = jax.device_put(np.zeros((33,), np.float32), trn)
  f(x)
  before = compilation.compile_count()
  for _ in range(3):
    f(x)
  assert compilation.compile_count() == before
  f(jax.device_put(np.zeros((34,), np.float32), trn))
  assert compilation.compile_count() == before + 1
