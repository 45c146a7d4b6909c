"""Donation: `jax.jit(..., donate_argnums=...)` updates donated arguments in place on trn — the
output takes over the argument's HBM bytes and the argument is deleted, as on JAX's CPU backend —
and where updating in place would be wrong (a read of the argument after the output is written,
a loop), the compiler keeps them apart and the result is still right."""

import gc
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import linen as nn

from cpu_reference import assert_close
from jax_trn import compilation
from hlo_lowering.program import TensorKind
from hlo_lowering.program.reader import read_program

RNG = np.random.default_rng(0)
A = RNG.standard_normal((300, 200)).astype(np.float32)
B = RNG.standard_normal((300, 200)).astype(np.float32)


def _hbm_in_use(device) -> int:
  return device.memory_stats()["bytes_in_use"]


def _run_donated(f, trn, cpu, *args):
  """f(*args) jitted with argument 0 donated on trn, compared with the CPU backend; returns
  (the trn argument, the trn result, the compile report)."""
  expected = jax.jit(f)(*[jax.device_put(a, cpu) for a in args])
  placed = [jax.device_put(a, trn) for a in args]
  with warnings.catch_warnings():
    warnings.simplefilter("error")  # no "Donation is not implemented for ('trn',)"
    actual = jax.jit(f, donate_argnums=0)(*placed)
  jax.block_until_ready(actual)
  assert_close(actual, expected, err_msg=getattr(f, "__name__", "f"))
  return placed[0], actual, compilation.last_report()


def test_donated_update_is_in_place_and_deletes_the_argument(trn, cpu):
  p = jax.device_put(A, trn)
  g = jax.device_put(B, trn)
  step = jax.jit(lambda p, g: p - 0.1 * g, donate_argnums=0)
  jax.block_until_ready(step(jax.device_put(A, trn), g))  # compiled; its result freed below
  gc.collect()
  in_use = _hbm_in_use(trn)
  q = step(p, g)
  jax.block_until_ready(q)
  gc.collect()
  assert compilation.last_report().donated_parameters == [0]
  assert p.is_deleted() and not g.is_deleted()
  assert _hbm_in_use(trn) == in_use  # the result lives in the argument's bytes
  for _ in range(3):
    q = step(q, g)
  np.testing.assert_allclose(np.asarray(q), A - 0.4 * B, rtol=1e-5, atol=1e-5)


def test_program_names_the_donated_parameter(trn, cpu):
  f = lambda p, g: (p * 2.0 + g, jnp.sum(g))
  _, _, report = _run_donated(f, trn, cpu, A, B)
  assert report.donated_parameters == [0]
  text = jax.jit(f, donate_argnums=0).lower(A, B).as_text(debug_info=True)
  tensors = read_program(compilation.compile_text(text)).tensors
  donated = [t for t in tensors if t.kind == TensorKind.DONATED_PARAMETER]
  assert [(t.index, t.output) for t in donated] == [(0, 0)]
  assert not [t for t in tensors if t.kind == TensorKind.OUTPUT and t.index == 0]


def test_read_after_the_update_keeps_them_apart(trn, cpu):
  """sum(g * p) reads p after p - 0.1 g is written: in place would read the new p."""
  p, _, report = _run_donated(lambda p, g: (p - 0.1 * g, jnp.sum(g * p)), trn, cpu, A, B)
  assert report.donated_parameters == []
  assert not p.is_deleted()


@pytest.mark.parametrize("name,f", [
    ("reverse", lambda p, g: p[::-1] + g),
    ("transpose", lambda p, g: (p.reshape(200, 300).T.reshape(300, 200) * 2.0) + g),
    ("shifted", lambda p, g: jnp.roll(p, 7, axis=0) - g),
    ("loop", lambda p, g: jax.lax.fori_loop(0, 3, lambda i, p: p - 0.1 * g * i, p)),
    ("while", lambda p, g: jax.lax.while_loop(lambda c: c[1] < 4,
                                              lambda c: (c[0] * 0.5 + g, c[1] + 1), (p, 0))[0]),
])
def test_in_place_is_only_taken_where_it_is_right(trn, cpu, name, f):
  _run_donated(f, trn, cpu, A, B)


def test_not_donated_arguments_stay_valid(trn):
  p = jax.device_put(A, trn)
  q = jax.jit(lambda p: p + 1.0)(p)
  np.testing.assert_array_equal(np.asarray(p), A)
  np.testing.assert_array_equal(np.asarray(q), A + 1.0)


class _Mlp(nn.Module):
  @nn.compact
  def __call__(self, x):
    return nn.Dense(10)(nn.relu(nn.Dense(64)(x)))


def _train(device, donate: bool, steps: int = 4):
  model, tx = _Mlp(), optax.adamw(1e-2)
  with jax.default_device(device):
    params = model.init(jax.random.key(0), jnp.ones((1, 32)))
    state = tx.init(params)

    def step(params, state, x, y):
      def loss_fn(p):
        return optax.softmax_cross_entropy_with_integer_labels(model.apply(p, x), y).mean()
      loss, grads = jax.value_and_grad(loss_fn)(params)
      updates, state = tx.update(grads, state, params)
      return optax.apply_updates(params, updates), state, loss

    step = jax.jit(step, donate_argnums=(0, 1) if donate else ())
    x = jax.device_put(np.random.default_rng(1).standard_normal((16, 32)).astype(np.float32),
                       device)
    y = jax.device_put(np.arange(16, dtype=np.int32) % 10, device)
    losses = []
    for _ in range(steps):
      params, state, loss = step(params, state, x, y)
      losses.append(float(loss))
  return losses, params


def test_flax_adamw_step_with_donated_state_trains_as_without(trn, cpu):
  donated, params = _train(trn, donate=True)
  assert compilation.last_report().donated_parameters  # parameters and moments in place
  plain, expected = _train(trn, donate=False)
  reference, _ = _train(cpu, donate=True)
  assert donated == plain
  np.testing.assert_allclose(donated, reference, rtol=1e-5)
  assert_close(params, expected)


def test_donated_update_over_a_counted_loop(trn, cpu):
  """A large update lowers to a counted loop; the in-place check follows every iteration."""
  big_p = RNG.standard_normal((4096, 256)).astype(np.float32)
  big_g = RNG.standard_normal((4096, 256)).astype(np.float32)
  p, _, report = _run_donated(lambda p, g: p * 0.9 - 0.1 * g, trn, cpu, big_p, big_g)
  assert report.donated_parameters == [0] and p.is_deleted()
  # Reading the next rows while writing these would not be in place-safe: kept apart, still right.
  p, _, report = _run_donated(lambda p, g: jnp.roll(p, -128, axis=0) * 0.9 - g, trn, cpu,
                              big_p, big_g)
