"""Tutorial-style NKI kernels written as a user writes them (only the imports name jax_trn),
shared by the NKI tests: tensor add, tiled matmul, softmax and RMSNorm over any shape."""

from jax_trn import nki
import jax_trn.nki.isa as nisa
import jax_trn.nki.language as nl


def _tiles(total, size):
  """(start, count) of each tile of at most `size` covering range(total)."""
  return [(start, min(size, total - start)) for start in range(0, total, size)]


@nki.jit
def tensor_add(a_input, b_input):
  out = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
  rows, cols = a_input.shape
  for r0, rn in _tiles(rows, nl.tile_size.pmax):
    for c0, cn in _tiles(cols, 512):
      a = nl.ndarray((rn, cn), dtype=a_input.dtype, buffer=nl.sbuf)
      b = nl.ndarray((rn, cn), dtype=b_input.dtype, buffer=nl.sbuf)
      nisa.dma_copy(dst=a, src=a_input[r0:r0 + rn, c0:c0 + cn])
      nisa.dma_copy(dst=b, src=b_input[r0:r0 + rn, c0:c0 + cn])
      c = nl.ndarray((rn, cn), dtype=a_input.dtype, buffer=nl.sbuf)
      nisa.tensor_tensor(dst=c, data1=a, data2=b, op=nl.add)
      nisa.dma_copy(dst=out[r0:r0 + rn, c0:c0 + cn], src=c)
  return out


@nki.jit
def tensor_add_legacy(a_input, b_input):
  """The Beta 1 getting-started kernel: nl.load / nl.add / nl.store (one tile)."""
  c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
  a_tile = nl.load(a_input)
  b_tile = nl.load(b_input)
  c_tile = nl.add(a_tile, b_tile)
  nl.store(c_output, value=c_tile)
  return c_output


@nki.jit
def exp_indexed(in_tensor):
  """Beta 1 index expressions: 128-row tiles addressed with nl.arange (shifted by the tile's
  start), the last (partial) one with nl.mgrid."""
  out = nl.ndarray(in_tensor.shape, dtype=in_tensor.dtype, buffer=nl.shared_hbm)
  rows, cols = in_tensor.shape
  i_p, i_f = nl.arange(128)[:, None], nl.arange(cols)[None, :]
  for t in nl.affine_range(rows // 128):
    tile = nl.load(in_tensor[t * 128 + i_p, i_f])
    nl.store(out[t * 128 + i_p, i_f], value=nl.exp(tile))
  if rows % 128:
    i_p, i_f = nl.mgrid[0:rows % 128, 0:cols]
    tile = nl.load(in_tensor[rows // 128 * 128 + i_p, i_f])
    nl.store(out[rows // 128 * 128 + i_p, i_f], value=nl.exp(tile))
  return out


@nki.jit
def matmul(lhs_t, rhs):
  """result[M, N] = lhs_t[K, M].T @ rhs[K, N], tiled 128 x 128 x 512, accumulating over K in
  PSUM."""
  k_total, m_total = lhs_t.shape
  _, n_total = rhs.shape
  result = nl.ndarray((m_total, n_total), dtype=lhs_t.dtype, buffer=nl.shared_hbm)
  for m0, mn in _tiles(m_total, nl.tile_size.gemm_stationary_fmax):
    for n0, nn in _tiles(n_total, nl.tile_size.gemm_moving_fmax):
      acc = nl.ndarray((nl.par_dim(mn), nn), dtype=nl.float32, buffer=nl.psum)
      for k0, kn in _tiles(k_total, nl.tile_size.pmax):
        lhs_tile = nl.ndarray((kn, mn), dtype=lhs_t.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=lhs_tile, src=lhs_t[k0:k0 + kn, m0:m0 + mn])
        rhs_tile = nl.ndarray((kn, nn), dtype=rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=rhs_tile, src=rhs[k0:k0 + kn, n0:n0 + nn])
        nisa.nc_matmul(dst=acc, stationary=lhs_tile, moving=rhs_tile)
      out_tile = nl.ndarray((mn, nn), dtype=result.dtype, buffer=nl.sbuf)
      nisa.tensor_copy(dst=out_tile, src=acc)
      nisa.dma_copy(dst=result[m0:m0 + mn, n0:n0 + nn], src=out_tile)
  return result


@nki.jit
def softmax(x):
  """Softmax over the last axis of x[R, C], 128 rows at a time."""
  rows, cols = x.shape
  out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
  for r0, rn in _tiles(rows, nl.tile_size.pmax):
    tile = nl.ndarray((rn, cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x[r0:r0 + rn, :])
    neg_max = nl.ndarray((rn, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=neg_max, op=nl.max, data=tile, axis=1, negate=True)
    exp = nl.ndarray((rn, cols), dtype=nl.float32, buffer=nl.sbuf)
    total = nl.ndarray((rn, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=exp, op=nl.exp, data=tile, bias=neg_max, reduce_op=nl.add,
                    reduce_res=total)
    inverse = nl.ndarray((rn, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.reciprocal(dst=inverse, data=total)
    result = nl.ndarray((rn, cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=result, data=exp, op0=nl.multiply, operand0=inverse)
    nisa.dma_copy(dst=out[r0:r0 + rn, :], src=result)
  return out


@nki.jit
def rmsnorm(x, gamma, eps=1e-6):
  """x[R, H] * rsqrt(mean(x^2, -1) + eps) * gamma[H]."""
  rows, hidden = x.shape
  out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
  gamma_row = gamma.reshape((1, hidden))
  for r0, rn in _tiles(rows, nl.tile_size.pmax):
    g = nl.ndarray((rn, hidden), dtype=gamma.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=g, src=gamma_row.broadcast_to((rn, hidden)))
    tile = nl.ndarray((rn, hidden), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x[r0:r0 + rn, :])
    squares = nl.ndarray((rn, hidden), dtype=nl.float32, buffer=nl.sbuf)
    total = nl.ndarray((rn, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=squares, op=nl.square, data=tile, reduce_op=nl.add, reduce_res=total)
    rstd = nl.ndarray((rn, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=rstd, data=total, op0=nl.multiply, operand0=1.0 / hidden,
                       op1=nl.add, operand1=eps)
    nisa.activation(dst=rstd, op=nl.rsqrt, data=rstd)
    result = nl.ndarray((rn, hidden), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=result, data=tile, op0=nl.multiply, operand0=rstd)
    nisa.tensor_tensor(dst=result, data1=result, data2=g, op=nl.multiply)
    nisa.dma_copy(dst=out[r0:r0 + rn, :], src=result)
  return out


@nki.jit
def tensor_add_grid(a_input, b_input):
  """Launched as tensor_add_grid[n](a, b): program i adds rows i*128 .. (i+1)*128."""
  out = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
  r0 = nl.program_id(0) * nl.tile_size.pmax
  a = nl.load(a_input[r0:r0 + nl.tile_size.pmax, :])
  b = nl.load(b_input[r0:r0 + nl.tile_size.pmax, :])
  nl.store(out[r0:r0 + nl.tile_size.pmax, :], value=a + b)
  return out
