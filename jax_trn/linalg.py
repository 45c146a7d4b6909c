"""Linear algebra on trn: lowerings for the lax.linalg primitives JAX lowers only for cpu/gpu/tpu.

Most of jnp.linalg needs nothing here: JAX's generic lowerings emit `cholesky`,
`triangular_solve` and the `Qr` / `ProductOfElementaryHouseholderReflectors` custom calls (which
the compiler's decompose-* passes expand), `lu` is JAX's own pure-JAX `_lu_python`, and `svd` is
JAX's portable QDWH polar decomposition + eigh. What is registered for platform "trn" here
(`register()`, called by jax_trn.plugin.initialize once "trn" is a known platform):

- `eigh`: cyclic two-sided Jacobi (`jacobi_eigh`, below). JAX's portable QDWH eigh (the TPU
  rule) splits matrices down to 256 and then asks for the TPU-only Jacobi custom call, so it is
  no portable path for the sizes users run; this is that Jacobi written in JAX, as XLA's
  EighExpander does it: rotations of n/2 disjoint pairs at once, the pairs cycling round-robin
  so that each sweep of n − 1 steps visits every pair once, until the off-diagonal norm is below
  `TOLERANCE` × the Frobenius norm (at most `MAX_SWEEPS` sweeps). Eigenvalues come out sorted
  ascending (also with sort_eigenvalues=False, which leaves the order to the implementation).
  Its gradient is JAX's own eigh JVP rule.
- a clear refusal for what has no portable algorithm (nonsymmetric `eig`, `schur`, `hessenberg`,
  `tridiagonal`, column-pivoted QR `geqp3`), naming the function and what to use instead.

Numerics: docs/numerics.md "Linear algebra".
"""

from __future__ import annotations

import numpy as np

from jax_trn import _jax_private

PLATFORM = "trn"
# Jacobi stops once ‖off-diagonal‖_F ≤ TOLERANCE · ‖A‖_F: float32 rounding leaves about n·eps
# there, and convergence is quadratic, so one sweep past 1e-6 reaches it (XLA's EighExpander
# uses tol 1e-6 and 100 sweeps for TPU).
TOLERANCE = 1e-6
MAX_SWEEPS = 100

_CPU = "jax.device_put(x, jax.devices('cpu')[0])"
REFUSED = {
    "eig": "jnp.linalg.eig (nonsymmetric eigendecomposition) is not supported on trn: JAX has "
           "no portable algorithm for it. For symmetric or Hermitian matrices use "
           f"jnp.linalg.eigh; otherwise compute it on the CPU ({_CPU}).",
    "schur": "jax.scipy.linalg.schur is not supported on trn: JAX has no portable algorithm "
             "for it. For symmetric matrices jnp.linalg.eigh gives the (diagonal) Schur form; "
             f"otherwise compute it on the CPU ({_CPU}).",
    "hessenberg": "jax.scipy.linalg.hessenberg is not supported on trn: JAX has no portable "
                  f"algorithm for it; compute it on the CPU ({_CPU}).",
    "tridiagonal": "lax.linalg.tridiagonal is not supported on trn: JAX has no portable "
                   "algorithm for it; use jnp.linalg.eigh for the eigendecomposition, or "
                   f"compute it on the CPU ({_CPU}).",
    "geqp3": "column-pivoted QR (jax.scipy.linalg.qr(..., pivoting=True), lax.linalg.geqp3) "
             "is not supported on trn: JAX has no portable algorithm for it; use "
             f"pivoting=False (Householder QR), or compute it on the CPU ({_CPU}).",
}


def _rotate_pairs(x, axis: int):
  """Reorders index pairs (2i, 2i+1) = (top_i, bottom_i) along `axis` by the round-robin step:
  top = [top_0, bottom_0, top_1, …, top_{h−2}], bottom = [bottom_1, …, bottom_{h−1}, top_{h−1}]."""
  from jax import lax
  import jax.numpy as jnp
  n = x.shape[axis]
  h = n // 2
  if h < 2:
    return x
  top = lax.slice_in_dim(x, 0, n, 2, axis)
  bottom = lax.slice_in_dim(x, 1, n, 2, axis)
  new_top = jnp.concatenate([lax.slice_in_dim(top, 0, 1, axis=axis),
                             lax.slice_in_dim(bottom, 0, 1, axis=axis),
                             lax.slice_in_dim(top, 1, h - 1, axis=axis)], axis)
  new_bottom = jnp.concatenate([lax.slice_in_dim(bottom, 1, h, axis=axis),
                                lax.slice_in_dim(top, h - 1, h, axis=axis)], axis)
  stacked = jnp.stack([new_top, new_bottom], axis + 1)
  return stacked.reshape(x.shape)


def _rotate(x, c, s, axis: int):
  """Applies the rotation [[c, s], [−s, c]] of each pair (2i, 2i+1) along `axis`: the pair's
  slices (p, q) become (c·p − s·q, s·p + c·q)."""
  from jax import lax
  import jax.numpy as jnp
  n = x.shape[axis]
  p = lax.slice_in_dim(x, 0, n, 2, axis)
  q = lax.slice_in_dim(x, 1, n, 2, axis)
  shape = [1] * x.ndim
  shape[axis] = n // 2
  c, s = c.reshape(shape), s.reshape(shape)
  return jnp.stack([c * p - s * q, s * p + c * q], axis + 1).reshape(x.shape)


def _pair_rotations(a):
  """(c, s) zeroing a[2i, 2i+1] for every pair (Golub & Van Loan's symmetric Schur 2×2)."""
  import jax.numpy as jnp
  n = a.shape[0]
  flat = a.reshape(n * n)
  diagonal = flat[::n + 1]
  app, aqq = diagonal[0::2], diagonal[1::2]
  apq = flat[1::2 * (n + 1)]
  rotate = apq != 0
  safe_apq = jnp.where(rotate, apq, 1)
  tau = (aqq - app) / (2 * safe_apq)
  t = jnp.where(tau >= 0, 1, -1) / (jnp.abs(tau) + jnp.sqrt(1 + tau * tau))
  c = 1 / jnp.sqrt(1 + t * t)
  s = t * c
  return jnp.where(rotate, c, 1), jnp.where(rotate, s, 0)


def _jacobi_step(a, v):
  c, s = _pair_rotations(a)
  a = _rotate(_rotate(a, c, s, 0), c, s, 1)
  v = _rotate(v, c, s, 1)
  return _rotate_pairs(_rotate_pairs(a, 0), 1), _rotate_pairs(v, 1)


def _off_diagonal_square(a):
  """‖a − diag(a)‖²_F, summed over the off-diagonal entries themselves (‖a‖² − ‖diag‖² would
  cancel catastrophically near convergence)."""
  import jax.numpy as jnp
  off = jnp.where(np.eye(a.shape[0], dtype=bool), 0, a)
  return jnp.sum(off * off)


def jacobi_eigh(a):
  """(eigenvalues ascending, eigenvectors as columns) of one symmetric [n, n] matrix."""
  from jax import lax
  import jax.numpy as jnp
  n = a.shape[0]
  padded = n + n % 2  # an odd matrix gets a zero row and column: a decoupled eigenpair (0, e_n)
  if padded != n:
    a = jnp.pad(a, ((0, 1), (0, 1)))
  limit = (TOLERANCE * TOLERANCE) * jnp.sum(a * a)

  def unconverged(state):
    a, _, sweeps = state
    return (sweeps < MAX_SWEEPS) & (_off_diagonal_square(a) > limit)

  def sweep(state):
    a, v, sweeps = state
    a, v = lax.fori_loop(0, padded - 1, lambda _, av: _jacobi_step(*av), (a, v))
    return a, v, sweeps + 1

  a, v, _ = lax.while_loop(unconverged, sweep, (a, jnp.eye(padded, dtype=a.dtype), 0))
  w = jnp.diagonal(a)
  if padded != n:
    # The padding's eigenvector is ±e_n exactly (its row of a stays zero, so no rotation mixes
    # it): sort it last and drop it.
    w = jnp.where(v[n] != 0, jnp.inf, w)
  order = jnp.argsort(w)
  return w[order][:n], v[:n][:, order][:, :n]


def _eigh(x, *, lower, sort_eigenvalues, subset_by_index, algorithm):
  """eigh_p's [v, w] on trn."""
  import jax
  import jax.numpy as jnp
  del sort_eigenvalues  # always sorted (allowed: the unsorted order is implementation-defined)
  if algorithm is not None and "QR" in str(algorithm).upper():
    raise NotImplementedError("eigh with implementation=QR is not supported on trn: use the "
                              "default (Jacobi on trn)")
  if not jnp.issubdtype(x.dtype, jnp.floating):
    raise NotImplementedError(f"eigh of {x.dtype} is not supported on trn: float32 only "
                              "(NeuronCores have no complex types)")
  n = x.shape[-1]
  if n == 0:
    return [x, jnp.zeros(x.shape[:-1], x.dtype)]
  rows, cols = np.indices((n, n))
  keep = (rows >= cols) if lower else (rows <= cols)
  symmetric = jnp.where(keep, x, jnp.swapaxes(x, -1, -2))
  solve = jacobi_eigh
  for _ in range(x.ndim - 2):
    solve = jax.vmap(solve)
  w, v = solve(symmetric)
  if subset_by_index is not None:
    lo, hi = subset_by_index
    w, v = w[..., lo:hi], v[..., lo:hi]
  return [v, w]


def register() -> None:
  """Registers the trn lowerings above (needs "trn" to be a known platform)."""
  _jax_private.register_jax_lowering(_jax_private.linalg_primitive("eigh"), _eigh, PLATFORM,
                                     multiple_results=True)
  for name, message in REFUSED.items():
    _jax_private.register_refusing_lowering(_jax_private.linalg_primitive(name), PLATFORM,
                                            message)
