"""The pieces RMSNorm and LayerNorm share: a per-feature vector replicated across partitions, and
a row's reciprocal root mean square from its sum of squares."""

import jax_trn.nki.isa as nisa
import jax_trn.nki.language as nl


def replicated(vector, partitions: int):
  """A [hidden] HBM vector in SBUF on `partitions` partitions (one broadcasting DMA)."""
  (hidden,) = vector.shape
  tile = nl.ndarray((partitions, hidden), dtype=vector.dtype, buffer=nl.sbuf)
  nisa.dma_copy(dst=tile, src=vector.reshape((1, hidden)).broadcast_to((partitions, hidden)))
  return tile


def reciprocal_rms(sum_of_squares, rows: int, hidden: int, eps: float):
  """rsqrt(sum_of_squares / hidden + eps), a [rows, 1] float32 tile."""
  rstd = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
  nisa.tensor_scalar(dst=rstd, data=sum_of_squares, op0=nl.multiply, operand0=1.0 / hidden,
                     op1=nl.add, operand1=eps)
  nisa.activation(dst=rstd, op=nl.rsqrt, data=rstd)
  return rstd
