"""LayerNorm over the last axis: (x - mean) * rsqrt(var + eps) * gamma + beta, 128 rows at a
time, with gamma replicated across partitions once by a broadcasting DMA and beta loaded once
as one row.

Per row tile VectorE and ScalarE each make two passes over the rows. VectorE sums the rows (a
bf16 reduce), then ScalarE squares and sums the centred rows in one pass (the mean as its
per-partition bias) and takes rstd. VectorE makes (x - mean) · γ in one scalar_tensor_tensor
(the centring per partition, γ per column). TensorE scales the rows by rstd (diag(rstd) as the
stationary operand, as in RMSNorm) and adds β to every row (a rank-1 matmul of a ones row and
β) into one PSUM accumulation group, and ScalarE copies the sum out in x's dtype. So γ and β,
the per-column operations that only VectorE has, cost one VectorE pass instead of two."""

import jax
import jax.numpy as jnp

from jax_trn import nki
import jax_trn.nki.isa as nisa
import jax_trn.nki.language as nl
from jax_trn.kernels.row_norm import replicated, row_scaling
from jax_trn.kernels.tiles import as_rows, identity_tile, program_share, tiles

PSUM_COLUMNS = 1024  # fp32 columns of one PSUM accumulation tile (two banks): two in flight


def reference(x, gamma, beta, eps=1e-5):
  x32 = x.astype(jnp.float32)
  mean = jnp.mean(x32, axis=-1, keepdims=True)
  var = jnp.mean(jnp.square(x32 - mean), axis=-1, keepdims=True)
  y = (x32 - mean) * jax.lax.rsqrt(var + eps)
  return (y * gamma.astype(jnp.float32) + beta.astype(jnp.float32)).astype(x.dtype)


def _statistics(rows_in, r0, rn, eps, neg_mean_on_vector: bool):
  """A row tile loaded, its −mean and rstd ([rn, 1] fp32): VectorE's bf16 row sum (0.74 us per
  [128, 1024] tile on trn2, against ScalarE's 1.07), −sum / hidden on VectorE or ScalarE (in
  turn, evening out the two engines), ScalarE's square-and-sum of the centred rows (the mean as
  its per-partition bias) and rsqrt."""
  hidden = rows_in.shape[1]
  tile = nl.ndarray((rn, hidden), dtype=rows_in.dtype, buffer=nl.sbuf)
  nisa.dma_copy(dst=tile, src=rows_in[r0:r0 + rn, :])
  total = nl.ndarray((rn, 1), dtype=nl.float32, buffer=nl.sbuf)
  nisa.tensor_reduce(dst=total, op=nl.add, data=tile, axis=1)
  neg_mean = nl.ndarray((rn, 1), dtype=nl.float32, buffer=nl.sbuf)
  if neg_mean_on_vector:
    nisa.tensor_scalar(dst=neg_mean, data=total, op0=nl.multiply, operand0=-1.0 / hidden)
  else:
    nisa.activation(dst=neg_mean, op=nl.copy, data=total, scale=-1.0 / hidden)
  squares = nl.ndarray((rn, hidden), dtype=nl.float32, buffer=nl.sbuf)  # ScalarE's unused rows
  centred_total = nl.ndarray((rn, 1), dtype=nl.float32, buffer=nl.sbuf)
  nisa.activation(dst=squares, op=nl.square, data=tile, bias=neg_mean, reduce_op=nl.add,
                  reduce_res=centred_total)
  rstd = nl.ndarray((rn, 1), dtype=nl.float32, buffer=nl.sbuf)
  nisa.activation(dst=rstd, op=nl.rsqrt, data=centred_total, scale=1.0 / hidden, bias=eps)
  return tile, neg_mean, rstd


def _centred_times_gamma(tile, neg_mean, g):
  """(x − mean) · γ in x's dtype: one VectorE pass (the intermediate in fp32)."""
  rn = tile.shape[0]
  centred = nl.ndarray(tile.shape, dtype=tile.dtype, buffer=nl.sbuf)
  nisa.scalar_tensor_tensor(dst=centred, data=tile, op0=nl.add, operand0=neg_mean,
                            op1=nl.multiply, operand1=g[0:rn, :])
  return centred


def _store(rows_out, centred, scaling, ones, b, r0):
  """rstd · (x − mean) · γ + β: TensorE's row scaling and rank-1 β into PSUM, ScalarE's copy
  out in x's dtype, stored."""
  rn, hidden = centred.shape
  result = nl.ndarray((rn, hidden), dtype=centred.dtype, buffer=nl.sbuf)
  for c0, cn in tiles(hidden, PSUM_COLUMNS):
    acc = nl.ndarray((rn, cn), dtype=nl.float32, buffer=nl.psum)
    for m0, mn in tiles(cn, nl.tile_size.gemm_moving_fmax):
      columns = slice(c0 + m0, c0 + m0 + mn)
      nisa.nc_matmul(dst=acc[:, m0:m0 + mn], stationary=ones[0:1, 0:rn], moving=b[0:1, columns])
      nisa.nc_matmul(dst=acc[:, m0:m0 + mn], stationary=scaling, moving=centred[:, columns])
    nisa.activation(dst=result[:, c0:c0 + cn], op=nl.copy, data=acc)
  nisa.dma_copy(dst=rows_out[r0:r0 + rn, :], src=result)


@nki.jit
def layernorm_kernel(x, gamma, beta, eps=1e-5):
  out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
  rows_in, rows_out = as_rows(x), as_rows(out)
  share = program_share(tiles(rows_in.shape[0], nl.tile_size.pmax))
  if not share:  # fewer row tiles than cores
    return out
  hidden = rows_in.shape[1]
  identity = identity_tile(x.dtype)
  # Software-pipelined over three stages so that no engine's in-order stream waits on another's
  # work of the same tile: at step t the statistics of tile t + 2, VectorE's (x − mean) · γ of
  # tile t + 1 and TensorE's and ScalarE's output of tile t (the first tile's load goes before
  # γ's and β's, taking the bandwidth first).
  stats = [_statistics(rows_in, *share[0], eps, True)]
  g = replicated(gamma, max(rn for _, rn in share))
  b = nl.ndarray((1, hidden), dtype=beta.dtype, buffer=nl.sbuf)
  nisa.dma_copy(dst=b, src=beta.reshape((1, hidden)))
  ones = nl.ndarray((1, nl.tile_size.pmax), dtype=beta.dtype, buffer=nl.sbuf)
  nisa.memset(dst=ones, value=1.0)
  if len(share) > 1:
    stats.append(_statistics(rows_in, *share[1], eps, False))
  centred = [_centred_times_gamma(stats[0][0], stats[0][1], g)]
  for t, (r0, rn) in enumerate(share):
    if t + 2 < len(share):
      stats.append(_statistics(rows_in, *share[t + 2], eps, t % 2 == 0))
    if t + 1 < len(share):
      centred.append(_centred_times_gamma(stats[t + 1][0], stats[t + 1][1], g))
    scaling = row_scaling(identity, stats[t][2], x.dtype, on_vector=True)
    _store(rows_out, centred[t], scaling, ones, b, r0)
  return out


# Both physical cores of an LNC=2 device, each on half the row tiles (one core elsewhere).
layernorm_kernel = layernorm_kernel[nl.nc(2)]
