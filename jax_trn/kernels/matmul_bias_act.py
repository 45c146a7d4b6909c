"""act(x @ w + bias), fused. Per block of 128 rows of x: a contiguous load, TensorE transposes
that put the contraction dim on partitions, then for each 512-column block one PSUM
accumulation group over K, the bias its last matmul (below fp32), and the activation reading
PSUM. w stays in SBUF when it fits (it is read once per core), otherwise its tiles are loaded
per row block. Software-pipelined (a block's transposes ahead of the previous block's matmuls)
and launched over both physical cores (kernel[nl.nc(2)]), each core takes half the row
blocks."""

import jax
import jax.numpy as jnp

from jax_trn import nki
import jax_trn.nki.isa as nisa
import jax_trn.nki.language as nl
from jax_trn.kernels.tiles import program_share, tiles

ACTIVATIONS = {"none": (nl.copy, lambda y: y), "relu": (nl.relu, jax.nn.relu),
               "silu": (nl.silu, jax.nn.silu), "tanh": (nl.tanh, jnp.tanh),
               "sigmoid": (nl.sigmoid, jax.nn.sigmoid)}
RESIDENT_W_BYTES = 96 * 1024  # per partition: keep w in SBUF up to this


def reference(x, w, bias, act="relu"):
  y = jnp.matmul(x, w, preferred_element_type=jnp.float32) + bias.astype(jnp.float32)
  return ACTIVATIONS[act][1](y).astype(x.dtype)


def _load_w(w, k_tiles, n0, nn):
  tiles_ = []
  for k0, kn in k_tiles:
    tile = nl.ndarray((kn, nn), dtype=w.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=w[k0:k0 + kn, n0:n0 + nn])
    tiles_.append(tile)
  return tiles_


def _load_rows(x, m0, mn):
  rows = nl.ndarray((mn, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
  nisa.dma_copy(dst=rows, src=x[m0:m0 + mn, :])
  return rows


def _transposed(rows, k_tiles):
  """rows.T, one [K tile, rows] tile per K tile (TensorE transposes, their PSUM copies
  alternating between VectorE and ScalarE)."""
  x_t = []
  for i, (k0, kn) in enumerate(k_tiles):
    flipped = nl.ndarray((kn, rows.shape[0]), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_transpose(dst=flipped, data=rows[:, k0:k0 + kn])
    tile = nl.ndarray((kn, rows.shape[0]), dtype=rows.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=tile, src=flipped,
                     engine=nisa.engine.scalar if i % 2 else nisa.engine.vector)
    x_t.append(tile)
  return x_t


@nki.jit
def matmul_bias_act_kernel(x, w, bias, act="relu"):
  m_total, k_total = x.shape
  _, n_total = w.shape
  function = ACTIVATIONS[act][0]
  out = nl.ndarray((m_total, n_total), dtype=x.dtype, buffer=nl.shared_hbm)
  pmax = nl.tile_size.pmax
  k_tiles = tiles(k_total, pmax)
  n_tiles = tiles(n_total, nl.tile_size.gemm_moving_fmax)
  share = program_share(tiles(m_total, pmax))
  if not share:  # fewer row blocks than cores
    return out
  # Below fp32 the bias joins each accumulation group last as a rank-1 matmul, ones ⊗ bias: PSUM
  # adds it in fp32 as a VectorE add would, and the activation reads PSUM directly. An fp32
  # matmul runs at a quarter of the rate on TensorE, the bound there: VectorE adds the bias
  # (replicated across partitions by a broadcasting DMA) on its way out of PSUM.
  on_tensor_engine = x.dtype != nl.float32
  partitions = 1 if on_tensor_engine else max(mn for _, mn in share)
  b = nl.ndarray((partitions, n_total), dtype=bias.dtype, buffer=nl.sbuf)
  nisa.dma_copy(dst=b, src=bias.reshape((1, n_total)).broadcast_to((partitions, n_total)))
  if on_tensor_engine:
    ones = nl.ndarray((1, pmax), dtype=bias.dtype, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
  # The first two row blocks load ahead of w, and block t + 1's transposes go to TensorE ahead
  # of block t's matmuls, so TensorE never waits on the PSUM copies of the block it multiplies.
  rows = [_load_rows(x, m0, mn) for m0, mn in share[0:2]]
  resident = len(k_tiles) * n_total * w.itemsize <= RESIDENT_W_BYTES
  w_blocks = [_load_w(w, k_tiles, n0, nn) for n0, nn in n_tiles] if resident else None
  x_t_next = _transposed(rows[0], k_tiles)
  for t, (m0, mn) in enumerate(share):
    x_t = x_t_next
    if t + 2 < len(share):
      rows.append(_load_rows(x, *share[t + 2]))
    if t + 1 < len(share):
      x_t_next = _transposed(rows[t + 1], k_tiles)
    for j, (n0, nn) in enumerate(n_tiles):
      w_tiles = w_blocks[j] if resident else _load_w(w, k_tiles, n0, nn)
      acc = nl.ndarray((mn, nn), dtype=nl.float32, buffer=nl.psum)
      for stationary, moving in zip(x_t, w_tiles):
        nisa.nc_matmul(dst=acc, stationary=stationary, moving=moving)
      if on_tensor_engine:
        nisa.nc_matmul(dst=acc, stationary=ones[:, 0:mn], moving=b[:, n0:n0 + nn])
        biased = acc
      else:
        biased = nl.ndarray((mn, nn), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=biased, data1=acc, data2=b[0:mn, n0:n0 + nn], op=nl.add)
      result = nl.ndarray((mn, nn), dtype=x.dtype, buffer=nl.sbuf)
      nisa.activation(dst=result, op=function, data=biased)
      nisa.dma_copy(dst=out[m0:m0 + mn, n0:n0 + nn], src=result)
  return out


matmul_bias_act_kernel = matmul_bias_act_kernel[nl.nc(2)]
