"""LayerNorm over the last axis: (x - mean) * rsqrt(var + eps) * gamma + beta, 128 rows at a
time, with gamma and beta replicated across partitions once by broadcasting DMAs.

Per row tile: the row sum (VectorE's tensor_reduce on two of every three tiles, ScalarE's
activation_reduce on the third, so the two engines carry equal work), then ScalarE squares and sums
the centred rows in one pass (the mean as its per-partition bias) and makes x · rstd − mean · rstd
(a per-partition scale and bias) in x's dtype; VectorE multiplies by γ and adds β, both in x's
dtype (bf16 tensor_tensor runs at twice the fp32 rate). The two per-column operations keep it
engine-bound (≈ 2.3× the HBM bound on trn2 at LNC=2, docs/kernels.md)."""

import jax
import jax.numpy as jnp

from jax_trn import nki
import jax_trn.nki.isa as nisa
import jax_trn.nki.language as nl
from jax_trn.kernels.row_norm import replicated
from jax_trn.kernels.tiles import as_rows, program_share, tiles


def reference(x, gamma, beta, eps=1e-5):
  x32 = x.astype(jnp.float32)
  mean = jnp.mean(x32, axis=-1, keepdims=True)
  var = jnp.mean(jnp.square(x32 - mean), axis=-1, keepdims=True)
  y = (x32 - mean) * jax.lax.rsqrt(var + eps)
  return (y * gamma.astype(jnp.float32) + beta.astype(jnp.float32)).astype(x.dtype)


def _sum_on_vector(tile_index: int) -> bool:
  """Two of every three row sums on VectorE (a bf16 reduce, 0.74 us per [128, 1024] tile on
  trn2), the third on ScalarE (1.07 us): the split that evens out the two engines' work."""
  return tile_index % 3 != 2


def _row_sum(tile, scratch, on_vector: bool):
  """Each row's fp32 sum, on VectorE or on ScalarE."""
  total = nl.ndarray((tile.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
  if on_vector:
    nisa.tensor_reduce(dst=total, op=nl.add, data=tile, axis=1)
  else:
    nisa.activation(dst=scratch, op=nl.copy, data=tile, reduce_op=nl.add, reduce_res=total)
  return total


def _statistics(rows_in, r0, rn, eps, sum_on_vector: bool):
  """A row tile loaded, and its rstd and −mean · rstd ([rn, 1] fp32)."""
  hidden = rows_in.shape[1]
  tile = nl.ndarray((rn, hidden), dtype=rows_in.dtype, buffer=nl.sbuf)
  nisa.dma_copy(dst=tile, src=rows_in[r0:r0 + rn, :])
  scratch = nl.ndarray((rn, hidden), dtype=nl.float32, buffer=nl.sbuf)  # ScalarE's unused rows
  neg_mean = nl.ndarray((rn, 1), dtype=nl.float32, buffer=nl.sbuf)
  nisa.activation(dst=neg_mean, op=nl.copy, data=_row_sum(tile, scratch, sum_on_vector),
                  scale=-1.0 / hidden)
  total = nl.ndarray((rn, 1), dtype=nl.float32, buffer=nl.sbuf)
  nisa.activation(dst=scratch, op=nl.square, data=tile, bias=neg_mean, reduce_op=nl.add,
                  reduce_res=total)
  rstd = nl.ndarray((rn, 1), dtype=nl.float32, buffer=nl.sbuf)
  nisa.activation(dst=rstd, op=nl.rsqrt, data=total, scale=1.0 / hidden, bias=eps)
  shift = nl.ndarray((rn, 1), dtype=nl.float32, buffer=nl.sbuf)
  nisa.activation(dst=shift, op=nl.copy, data=neg_mean, scale=rstd)
  return tile, rstd, shift


def _normalised(tile, rstd, shift):
  """x · rstd − mean · rstd in x's dtype (ScalarE: a per-partition scale and bias)."""
  normed = nl.ndarray(tile.shape, dtype=tile.dtype, buffer=nl.sbuf)
  nisa.activation(dst=normed, op=nl.copy, data=tile, scale=rstd, bias=shift)
  return normed


def _affine(rows_out, normed, g, b, r0, rn):
  """γ · normed + β (VectorE, in x's dtype), stored."""
  nisa.tensor_tensor(dst=normed, data1=normed, data2=g[0:rn, :], op=nl.multiply)
  result = nl.ndarray(normed.shape, dtype=normed.dtype, buffer=nl.sbuf)
  nisa.tensor_tensor(dst=result, data1=normed, data2=b[0:rn, :], op=nl.add)
  nisa.dma_copy(dst=rows_out[r0:r0 + rn, :], src=result)


@nki.jit
def layernorm_kernel(x, gamma, beta, eps=1e-5):
  out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
  rows_in, rows_out = as_rows(x), as_rows(out)
  share = program_share(tiles(rows_in.shape[0], nl.tile_size.pmax))
  if not share:  # fewer row tiles than cores
    return out
  # Software-pipelined over three stages so that neither engine's in-order stream waits on the
  # other's work of the same tile: at step t ScalarE's normalisation of tile t + 1, the
  # statistics of tile t + 2 and VectorE's γ, β of tile t (the first tile's load goes before
  # γ's and β's, taking the bandwidth first).
  stats = [_statistics(rows_in, *share[0], eps, _sum_on_vector(0))]
  partitions = max(rn for _, rn in share)
  g, b = replicated(gamma, partitions), replicated(beta, partitions)
  normed = [_normalised(*stats[0])]
  if len(share) > 1:
    stats.append(_statistics(rows_in, *share[1], eps, _sum_on_vector(1)))
  for t, (r0, rn) in enumerate(share):
    if t + 1 < len(share):
      normed.append(_normalised(*stats[t + 1]))
    if t + 2 < len(share):
      stats.append(_statistics(rows_in, *share[t + 2], eps, _sum_on_vector(t + 2)))
    _affine(rows_out, normed[t], g, b, r0, rn)
  return out


# Both physical cores of an LNC=2 device, each on half the row tiles (one core elsewhere).
layernorm_kernel = layernorm_kernel[nl.nc(2)]
