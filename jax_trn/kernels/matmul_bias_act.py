"""act(x @ w + bias), fused: TensorE computes the output transposed (features on partitions,
x's rows streaming as the moving operand), so the bias is a per-partition value and ScalarE adds
it and applies the activation while it copies each PSUM tile out; a transposing DMA stores it.
x's row block stays in SBUF across every feature block."""

import jax
import jax.numpy as jnp

from jax_trn import nki
import jax_trn.nki.isa as nisa
import jax_trn.nki.language as nl
from jax_trn.kernels.tiles import tiles

ACTIVATIONS = {"none": (nl.copy, lambda y: y), "relu": (nl.relu, jax.nn.relu),
               "silu": (nl.silu, jax.nn.silu), "tanh": (nl.tanh, jnp.tanh),
               "sigmoid": (nl.sigmoid, jax.nn.sigmoid)}


def reference(x, w, bias, act="relu"):
  y = jnp.matmul(x, w, preferred_element_type=jnp.float32) + bias.astype(jnp.float32)
  return ACTIVATIONS[act][1](y).astype(x.dtype)


@nki.jit
def matmul_bias_act_kernel(x, w, bias, act="relu"):
  m_total, k_total = x.shape
  _, n_total = w.shape
  function = ACTIVATIONS[act][0]
  out = nl.ndarray((m_total, n_total), dtype=x.dtype, buffer=nl.shared_hbm)
  k_tiles = tiles(k_total, nl.tile_size.pmax)
  for m0, mn in tiles(m_total, nl.tile_size.gemm_moving_fmax):
    x_t = []  # x[m block].T, one [K tile, mn] tile per K tile
    for k0, kn in k_tiles:
      tile = nl.ndarray((kn, mn), dtype=x.dtype, buffer=nl.sbuf)
      nisa.dma_copy(dst=tile, src=x[m0:m0 + mn, k0:k0 + kn].T)
      x_t.append(tile)
    for n0, nn in tiles(n_total, nl.tile_size.gemm_stationary_fmax):
      b = nl.ndarray((nn, 1), dtype=bias.dtype, buffer=nl.sbuf)
      nisa.dma_copy(dst=b, src=bias.reshape((n_total, 1))[n0:n0 + nn, :])
      acc = nl.ndarray((nn, mn), dtype=nl.float32, buffer=nl.psum)
      for (k0, kn), moving in zip(k_tiles, x_t):
        w_tile = nl.ndarray((kn, nn), dtype=w.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=w_tile, src=w[k0:k0 + kn, n0:n0 + nn])
        nisa.nc_matmul(dst=acc, stationary=w_tile, moving=moving)
      result = nl.ndarray((nn, mn), dtype=x.dtype, buffer=nl.sbuf)
      nisa.activation(dst=result, op=function, data=acc, bias=b)
      nisa.dma_copy(dst=out[m0:m0 + mn, n0:n0 + nn].T, src=result)
  return out
