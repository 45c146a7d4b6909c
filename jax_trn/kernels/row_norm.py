"""The pieces RMSNorm and LayerNorm share: a per-feature vector replicated across partitions,
and diag(per-row scale) as a matmul's stationary operand (TensorE scales a tile's rows)."""

import jax_trn.nki.isa as nisa
import jax_trn.nki.language as nl


def replicated(vector, partitions: int):
  """A [hidden] HBM vector in SBUF on `partitions` partitions (one broadcasting DMA)."""
  (hidden,) = vector.shape
  tile = nl.ndarray((partitions, hidden), dtype=vector.dtype, buffer=nl.sbuf)
  nisa.dma_copy(dst=tile, src=vector.reshape((1, hidden)).broadcast_to((partitions, hidden)))
  return tile


def row_scaling(identity, scale, dtype, on_vector: bool):
  """diag(scale) [rows, rows] in `dtype`, made on VectorE or ScalarE (the same values):
  nc_matmul(stationary=it, moving=tile) is the tile with row r times scale[r] (scale: a
  [rows, 1] fp32 tile)."""
  rows = scale.shape[0]
  diagonal = nl.ndarray((rows, rows), dtype=dtype, buffer=nl.sbuf)
  if on_vector:
    nisa.tensor_scalar(dst=diagonal, data=identity[0:rows, 0:rows], op0=nl.multiply,
                       operand0=scale)
  else:
    nisa.activation(dst=diagonal, op=nl.copy, data=identity[0:rows, 0:rows], scale=scale)
  return diagonal
