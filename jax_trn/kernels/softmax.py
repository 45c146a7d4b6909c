"""Softmax over the last axis: per 128 rows, VectorE takes the max and the sum, ScalarE the two
exponentials: exp(x - max) for the sum, then exp(x - max - log(sum)) as the result, so no
per-element division is needed and the two engines share the work."""

import jax
import jax.numpy as jnp

from jax_trn import nki
import jax_trn.nki.isa as nisa
import jax_trn.nki.language as nl
from jax_trn.kernels.tiles import as_rows, program_share, tiles


def reference(x):
  return jax.nn.softmax(x.astype(jnp.float32), axis=-1).astype(x.dtype)


@nki.jit
def softmax_kernel(x):
  out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
  rows_in, rows_out = as_rows(x), as_rows(out)
  cols = x.shape[-1]
  for r0, rn in program_share(tiles(rows_in.shape[0], nl.tile_size.pmax)):
    tile = nl.ndarray((rn, cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=rows_in[r0:r0 + rn, :])
    neg_max = nl.ndarray((rn, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=neg_max, op=nl.max, data=tile, axis=1, negate=True)
    shifted = nl.ndarray((rn, cols), dtype=nl.float32, buffer=nl.sbuf)
    total = nl.ndarray((rn, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=shifted, op=nl.exp, data=tile, bias=neg_max, reduce_op=nl.add,
                    reduce_res=total)
    log_total = nl.ndarray((rn, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=log_total, op=nl.log, data=total)
    bias = nl.ndarray((rn, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=bias, data1=neg_max, data2=log_total, op=nl.subtract)
    result = nl.ndarray((rn, cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.activation(dst=result, op=nl.exp, data=tile, bias=bias)
    nisa.dma_copy(dst=rows_out[r0:r0 + rn, :], src=result)
  return out


# Both physical cores of an LNC=2 device, each on half the row tiles (one core elsewhere).
softmax_kernel = softmax_kernel[nl.nc(2)]
