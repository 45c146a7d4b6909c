"""Run-time control flow through JAX and the PJRT plugin: lax.while_loop, fori_loop with traced
bounds, lax.cond and lax.switch, against the CPU backend."""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from cpu_reference import assert_matches_cpu


def test_while_cond_and_switch_through_the_plugin(trn, cpu):
  def f(n, i, x):
    def body(k, v):
      v = lax.cond(k % 2 == 0, lambda u: u * 1.5, lambda u: jnp.tanh(u) + 1.0, v)
      return lax.switch(i, [lambda u: u + 1.0, lambda u: u - 0.25], v)
    y = lax.fori_loop(0, n, body, x)
    steps = lax.while_loop(lambda s: s[0] < 1000.0, lambda s: (s[0] * 2.0 + 1.0, s[1] + 1),
                           (jnp.abs(y[0, 0]) + 1.0, jnp.int32(0)))
    return y, steps
  x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)
  for n, i in ((7, 0), (4, 1), (0, 5)):
    assert_matches_cpu(f, np.int32(n), np.int32(i), x, trn=trn, cpu=cpu)
