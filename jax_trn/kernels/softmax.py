"""Softmax over the last axis, 128 rows at a time: VectorE takes the row max, ScalarE exp(x - max)
and its row sum in one pass, VectorE 1 / sum; the result exp(x - max) · (1 / sum) is then made
from both ends of the row at once, its first SCALAR_SHARE of the columns by ScalarE (a copy with
a per-partition scale), the rest by VectorE, so that the two engines carry equal work.
Software-pipelined over three stages (at step t: tile t + 2's max, tile t + 1's exponentials and
1 / sum, tile t's result) and launched over both physical cores (kernel[nl.nc(2)]), each on
half the row tiles."""

import jax
import jax.numpy as jnp

from jax_trn import nki
import jax_trn.nki.isa as nisa
import jax_trn.nki.language as nl
from jax_trn.kernels.tiles import as_rows, program_share, tiles

# ScalarE's part of the result's columns. Per [128, 1024] tile on trn2 ScalarE has exp + sum
# (1.07 us) before its part, VectorE the max (0.74 us in bf16), its negation and 1 / sum
# (0.28 us each) before its part, VectorE running at 0.96 GHz against ScalarE's 1.2: with this
# share both are busy ~1.8 us per tile.
SCALAR_SHARE = 0.7
MIN_SPLIT_COLUMNS = 256  # below this the second instruction's fixed cost outweighs the split


def reference(x):
  return jax.nn.softmax(x.astype(jnp.float32), axis=-1).astype(x.dtype)


class _Rows:
  """One row tile on its way through the three stages."""

  def __init__(self, rows_in, r0, rn):
    """Stage 1: the tile loaded, and −max of each row (VectorE)."""
    self.r0, self.rn = r0, rn
    self.tile = nl.ndarray((rn, rows_in.shape[1]), dtype=rows_in.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=self.tile, src=rows_in[r0:r0 + rn, :])
    self.neg_max = nl.ndarray((rn, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=self.neg_max, op=nl.max, data=self.tile, axis=1, negate=True)

  def exponentials(self):
    """Stage 2: exp(x - max) and its row sum (ScalarE), 1 / sum (VectorE)."""
    self.shifted = nl.ndarray(self.tile.shape, dtype=nl.float32, buffer=nl.sbuf)
    total = nl.ndarray((self.rn, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=self.shifted, op=nl.exp, data=self.tile, bias=self.neg_max,
                    reduce_op=nl.add, reduce_res=total)
    self.inverse = nl.ndarray((self.rn, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.reciprocal(dst=self.inverse, data=total)

  def store(self, rows_out):
    """Stage 3: exp(x - max) / sum, ScalarE's share of the columns and VectorE's, stored."""
    cols = self.tile.shape[1]
    split = round(cols * SCALAR_SHARE) if cols >= MIN_SPLIT_COLUMNS else cols
    result = nl.ndarray(self.tile.shape, dtype=self.tile.dtype, buffer=nl.sbuf)
    nisa.activation(dst=result[:, 0:split], op=nl.copy, data=self.shifted[:, 0:split],
                    scale=self.inverse)
    if split < cols:
      nisa.tensor_scalar(dst=result[:, split:cols], data=self.shifted[:, split:cols],
                         op0=nl.multiply, operand0=self.inverse)
    nisa.dma_copy(dst=rows_out[self.r0:self.r0 + self.rn, :], src=result)


@nki.jit
def softmax_kernel(x):
  out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
  rows_in, rows_out = as_rows(x), as_rows(out)
  share = program_share(tiles(rows_in.shape[0], nl.tile_size.pmax))
  staged = [_Rows(rows_in, r0, rn) for r0, rn in share[0:2]]
  if staged:
    staged[0].exponentials()
  for t in range(len(share)):
    if t + 2 < len(share):
      staged.append(_Rows(rows_in, *share[t + 2]))
    if t + 1 < len(share):
      staged[t + 1].exponentials()
    staged[t].store(rows_out)
  return out


# Both physical cores of an LNC=2 device, each on half the row tiles (one core elsewhere).
softmax_kernel = softmax_kernel[nl.nc(2)]
