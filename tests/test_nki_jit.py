"""A kernel and its backward kernel form a jax.custom_vjp: jax.grad through it on trn gives the
plain-JAX gradient; a kernel alone is not differentiable and says so."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jax_trn import nki
import jax_trn.nki.isa as nisa
import jax_trn.nki.language as nl

pytest.importorskip("jax_trn._native", reason="jax_trn._native is not built", exc_type=ImportError)


@nki.jit
def exp_kernel(x):
  out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
  tile = nl.load(x)
  result = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
  nisa.activation(dst=result, op=nl.exp, data=tile)
  nisa.dma_copy(dst=out, src=result)
  return out


@nki.jit
def multiply_kernel(a, b):
  out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
  nl.store(out, value=nl.multiply(nl.load(a), nl.load(b)))
  return out


@jax.custom_vjp
def kernel_exp(x):
  return exp_kernel(x)


def _forward(x):
  y = exp_kernel(x)
  return y, y


def _backward(y, g):
  return (multiply_kernel(g, y),)


kernel_exp.defvjp(_forward, _backward)


def test_custom_vjp_of_a_kernel_pair_gives_the_gradient(trn, cpu):
  x = np.random.default_rng(1).standard_normal((96, 40)).astype(np.float32)
  loss = lambda f: (lambda v: jnp.sum(f(v) * 3.0))  # noqa: E731
  grad = jax.jit(jax.grad(loss(kernel_exp)))(jax.device_put(x, trn))
  expected = jax.jit(jax.grad(loss(jnp.exp)))(jax.device_put(x, cpu))
  np.testing.assert_allclose(np.asarray(grad), np.asarray(expected), rtol=2e-6, atol=1e-6)


def test_a_kernel_alone_is_not_differentiable(trn):
  x = jax.device_put(np.ones((8, 8), np.float32), trn)
  with pytest.raises(Exception, match="ffi_call|JVP|differentiat"):
    jax.grad(lambda v: jnp.sum(exp_kernel(v)))(x)
