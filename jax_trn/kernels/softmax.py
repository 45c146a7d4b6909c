"""Softmax over the last axis, 128 rows at a time: VectorE takes the row max, ScalarE exp(x - max)
and its row sum in one pass; the result is then made from both ends of the row at once: ScalarE
computes exp(x - max - log(sum)) for the first SCALAR_SHARE of the columns (no division), VectorE
multiplies the rest of exp(x - max) by 1 / sum, so that the two engines carry equal work.
Software-pipelined (tile t + 1's max before tile t's result) and launched over both physical
cores (kernel[nl.nc(2)]), each on half the row tiles."""

import jax
import jax.numpy as jnp

from jax_trn import nki
import jax_trn.nki.isa as nisa
import jax_trn.nki.language as nl
from jax_trn.kernels.tiles import as_rows, program_share, tiles

# ScalarE's part of the result's columns: ScalarE has exp + sum (N + 266 cycles at 1.2 GHz on
# trn2) and two [P, 1] ops before it, VectorE the max (N / 2 in bf16, then its negation) and
# 1 / sum, at 0.96 GHz; with these shares both are busy ~2.1 us per [128, 1024] tile.
SCALAR_SHARE = 0.47
MIN_SPLIT_COLUMNS = 256  # below this the second instruction's fixed cost outweighs the split


def reference(x):
  return jax.nn.softmax(x.astype(jnp.float32), axis=-1).astype(x.dtype)


def _row_max(rows_in, r0, rn):
  """A row tile loaded, and −max of each row (VectorE)."""
  tile = nl.ndarray((rn, rows_in.shape[1]), dtype=rows_in.dtype, buffer=nl.sbuf)
  nisa.dma_copy(dst=tile, src=rows_in[r0:r0 + rn, :])
  neg_max = nl.ndarray((rn, 1), dtype=nl.float32, buffer=nl.sbuf)
  nisa.tensor_reduce(dst=neg_max, op=nl.max, data=tile, axis=1, negate=True)
  return tile, neg_max


def _softmax_rows(rows_out, tile, neg_max, r0, rn):
  cols = tile.shape[1]
  shifted = nl.ndarray((rn, cols), dtype=nl.float32, buffer=nl.sbuf)
  total = nl.ndarray((rn, 1), dtype=nl.float32, buffer=nl.sbuf)
  nisa.activation(dst=shifted, op=nl.exp, data=tile, bias=neg_max, reduce_op=nl.add,
                  reduce_res=total)
  log_total = nl.ndarray((rn, 1), dtype=nl.float32, buffer=nl.sbuf)
  nisa.activation(dst=log_total, op=nl.log, data=total)
  bias = nl.ndarray((rn, 1), dtype=nl.float32, buffer=nl.sbuf)  # −max − log(sum), on ScalarE
  nisa.activation(dst=bias, op=nl.copy, data=log_total, scale=-1.0, bias=neg_max)
  split = round(cols * SCALAR_SHARE) if cols >= MIN_SPLIT_COLUMNS else cols
  result = nl.ndarray((rn, cols), dtype=tile.dtype, buffer=nl.sbuf)
  nisa.activation(dst=result[:, 0:split], op=nl.exp, data=tile[:, 0:split], bias=bias)
  if split < cols:
    inverse = nl.ndarray((rn, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.reciprocal(dst=inverse, data=total)
    nisa.tensor_scalar(dst=result[:, split:cols], data=shifted[:, split:cols], op0=nl.multiply,
                       operand0=inverse)
  nisa.dma_copy(dst=rows_out[r0:r0 + rn, :], src=result)


@nki.jit
def softmax_kernel(x):
  out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
  rows_in, rows_out = as_rows(x), as_rows(out)
  share = program_share(tiles(rows_in.shape[0], nl.tile_size.pmax))
  if not share:  # fewer row tiles than cores
    return out
  ready = _row_max(rows_in, *share[0])
  for t, (r0, rn) in enumerate(share):
    following = _row_max(rows_in, *share[t + 1]) if t + 1 < len(share) else None
    _softmax_rows(rows_out, *ready, r0, rn)
    ready = following
  return out


# Both physical cores of an LNC=2 device, each on half the row tiles (one core elsewhere).
softmax_kernel = softmax_kernel[nl.nc(2)]
