"""Rotary position embedding (the rotate-half form): for x [H, S, d] and cos, sin [S, d/2],
out = [x1 cos - x2 sin, x2 cos + x1 sin] with x1, x2 the two halves of the last axis. Positions
go on partitions, 128 at a time; each block of cos/sin is loaded once, repeated for a group of
heads, so that each VectorE instruction works on the whole group (one head's [128, d/2] would
leave VectorE paying its fixed cost per instruction). Launched over both physical cores
(kernel[nl.nc(2)]), each core takes half the position blocks."""

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
  bank = nl.tile_size.psum_fmax  # fp32 elements per partition in one PSUM bank
  group = max(1, min(heads, bank // half))
  out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
  for s0, sn in program_share(tiles(seq, nl.tile_size.pmax)):
    c, s = (_repeated(table[s0:s0 + sn, :], group) for table in (cos, sin))
    for h0, hn in tiles(heads, group):
      rows = nl.ndarray((sn, hn, dim), dtype=x.dtype, buffer=nl.sbuf)
      for j in range(hn):
        nisa.dma_copy(dst=rows[:, j, :], src=x[h0 + j, s0:s0 + sn, :])
      x1, x2 = rows[:, :, 0:half], rows[:, :, half:dim]
      c_heads, s_heads = c[:, 0:hn, :], s[:, 0:hn, :]
      result = nl.ndarray((sn, hn, dim), dtype=x.dtype, buffer=nl.sbuf)
      for first, second, combine, dst in ((x1, x2, nl.subtract, result[:, :, 0:half]),
                                           (x2, x1, nl.add, result[:, :, half:dim])):
        # One operand in PSUM: VectorE reads it alongside the other at one element a cycle.
        scaled = nl.ndarray((sn, hn, half), dtype=nl.float32, buffer=nl.psum)
        nisa.tensor_tensor(dst=scaled, data1=first, data2=c_heads, op=nl.multiply)
        rotated = nl.ndarray((sn, hn, half), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=rotated, data1=second, data2=s_heads, op=nl.multiply)
        nisa.tensor_tensor(dst=dst, data1=scaled, data2=rotated, op=combine)
      for j in range(hn):
        nisa.dma_copy(dst=out[h0 + j, s0:s0 + sn, :], src=result[:, j, :])
  return out


def _repeated(table, group):
  """A [positions, d/2] block of cos or sin in SBUF once for each of `group` heads (one
  broadcasting DMA), so every VectorE instruction covers a whole group of heads."""
  positions, half = table.shape
  tile = nl.ndarray((positions, group, half), dtype=table.dtype, buffer=nl.sbuf)
  nisa.dma_copy(dst=tile, src=table.reshape((positions, 1, half)).broadcast_to(
      (positions, group, half)))
  return tile


rotary_kernel = rotary_kernel[nl.nc(2)]
