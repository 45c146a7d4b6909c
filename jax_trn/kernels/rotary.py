"""Rotary position embedding (the rotate-half form): for x [H, S, d] and cos, sin [S, d/2],
out = [x1 cos - x2 sin, x2 cos + x1 sin] with x1, x2 the two halves of the last axis. Positions
go on partitions, 128 at a time; each block of cos/sin is loaded once for every head. Launched
over both physical cores (kernel[nl.nc(2)]), each core takes half the position blocks."""

import jax.numpy as jnp

from jax_trn import nki
import jax_trn.nki.isa as nisa
import jax_trn.nki.language as nl
from jax_trn.kernels.tiles import program_share, tiles


def reference(x, cos, sin):
  half = x.shape[-1] // 2
  x1, x2 = x[..., :half].astype(jnp.float32), x[..., half:].astype(jnp.float32)
  c, s = cos.astype(jnp.float32), sin.astype(jnp.float32)
  return jnp.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1).astype(x.dtype)


@nki.jit
def rotary_kernel(x, cos, sin):
  heads, seq, dim = x.shape
  half = dim // 2
  out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
  for s0, sn in program_share(tiles(seq, nl.tile_size.pmax)):
    c = nl.ndarray((sn, half), dtype=cos.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=c, src=cos[s0:s0 + sn, :])
    s = nl.ndarray((sn, half), dtype=sin.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=sin[s0:s0 + sn, :])
    for head in range(heads):
      rows = nl.ndarray((sn, dim), dtype=x.dtype, buffer=nl.sbuf)
      nisa.dma_copy(dst=rows, src=x[head, s0:s0 + sn, :])
      x1, x2 = rows[:, 0:half], rows[:, half:dim]
      result = nl.ndarray((sn, dim), dtype=x.dtype, buffer=nl.sbuf)
      for first, second, combine, dst in ((x1, x2, nl.subtract, result[:, 0:half]),
                                           (x2, x1, nl.add, result[:, half:dim])):
        scaled = nl.ndarray((sn, half), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=scaled, data1=first, data2=c, op=nl.multiply)
        rotated = nl.ndarray((sn, half), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=rotated, data1=second, data2=s, op=nl.multiply)
        nisa.tensor_tensor(dst=dst, data1=scaled, data2=rotated, op=combine)
      nisa.dma_copy(dst=out[head, s0:s0 + sn, :], src=result)
  return out


rotary_kernel = rotary_kernel[nl.nc(2)]
