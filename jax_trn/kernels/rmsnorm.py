"""RMSNorm over the last axis: x * rsqrt(mean(x^2) + eps) * gamma, 128 rows at a time, with
gamma replicated across partitions once by a broadcasting DMA.

Per row tile each engine makes one pass over the rows: ScalarE squares and sums them
(activation_reduce) and takes rsqrt(sum / hidden + eps); TensorE scales the rows by rstd (a
matmul with diag(rstd) as the stationary operand, into PSUM: the per-row scale costs TensorE
time, which a norm otherwise leaves idle, instead of a ScalarE or VectorE pass); VectorE
multiplies that by γ on its way out of PSUM. diag(rstd) is in x's dtype (for bf16 rstd rounds
to bf16 there, as the scaled row would round to bf16 on ScalarE), made on VectorE and ScalarE
in turn so that each carries half."""

import jax
import jax.numpy as jnp

from jax_trn import nki
import jax_trn.nki.isa as nisa
import jax_trn.nki.language as nl
from jax_trn.kernels.row_norm import replicated, row_scaling
from jax_trn.kernels.tiles import as_rows, identity_tile, program_share, tiles

PSUM_COLUMNS = 1024  # fp32 columns of one PSUM tile (two banks): two tiles in flight


def reference(x, gamma, eps=1e-6):
  x32 = x.astype(jnp.float32)
  scale = jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
  return (x32 * scale * gamma.astype(jnp.float32)).astype(x.dtype)


def _statistics(rows_in, identity, r0, rn, eps, on_vector: bool):
  """A row tile loaded, and diag(rstd) for it (made on VectorE or on ScalarE)."""
  hidden = rows_in.shape[1]
  tile = nl.ndarray((rn, hidden), dtype=rows_in.dtype, buffer=nl.sbuf)
  nisa.dma_copy(dst=tile, src=rows_in[r0:r0 + rn, :])
  squares = nl.ndarray((rn, hidden), dtype=nl.float32, buffer=nl.sbuf)
  total = nl.ndarray((rn, 1), dtype=nl.float32, buffer=nl.sbuf)
  nisa.activation(dst=squares, op=nl.square, data=tile, reduce_op=nl.add, reduce_res=total)
  rstd = nl.ndarray((rn, 1), dtype=nl.float32, buffer=nl.sbuf)
  nisa.activation(dst=rstd, op=nl.rsqrt, data=total, scale=1.0 / hidden, bias=eps)
  return tile, row_scaling(identity, rstd, rows_in.dtype, on_vector)


def _normalise(rows_out, tile, scaling, g, r0, rn):
  """TensorE scales the rows by rstd into PSUM; VectorE multiplies by γ on the way out."""
  hidden = tile.shape[1]
  result = nl.ndarray((rn, hidden), dtype=tile.dtype, buffer=nl.sbuf)
  for c0, cn in tiles(hidden, PSUM_COLUMNS):
    scaled = nl.ndarray((rn, cn), dtype=nl.float32, buffer=nl.psum)
    for m0, mn in tiles(cn, nl.tile_size.gemm_moving_fmax):
      nisa.nc_matmul(dst=scaled[:, m0:m0 + mn], stationary=scaling,
                     moving=tile[:, c0 + m0:c0 + m0 + mn])
    nisa.tensor_tensor(dst=result[:, c0:c0 + cn], data1=scaled, data2=g[0:rn, c0:c0 + cn],
                       op=nl.multiply)
  nisa.dma_copy(dst=rows_out[r0:r0 + rn, :], src=result)


@nki.jit
def rmsnorm_kernel(x, gamma, eps=1e-6):
  out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
  rows_in, rows_out = as_rows(x), as_rows(out)
  share = program_share(tiles(rows_in.shape[0], nl.tile_size.pmax))
  if not share:  # fewer row tiles than cores
    return out
  identity = identity_tile(x.dtype)
  # Software-pipelined: tile t + 1's statistics are issued before tile t is normalised, so
  # neither engine's in-order stream waits on the other's work of the same tile. The first
  # tile's load goes before γ's (the first DMA takes the bandwidth first).
  ready = _statistics(rows_in, identity, *share[0], eps, on_vector=True)
  g = replicated(gamma, max(rn for _, rn in share))
  for t, (r0, rn) in enumerate(share):
    following = (_statistics(rows_in, identity, *share[t + 1], eps, on_vector=t % 2 == 1)
                 if t + 1 < len(share) else None)
    _normalise(rows_out, *ready, g, r0, rn)
    ready = following
  return out


# Both physical cores of an LNC=2 device, each on half the row tiles (one core elsewhere).
rmsnorm_kernel = rmsnorm_kernel[nl.nc(2)]
