"""jnp.linalg, jax.scipy.linalg and lax.linalg on trn agree with the CPU backend (LAPACK) and
satisfy their defining identities, inside jit, batched, with gradients; what has no portable
algorithm is refused by name.

Tolerances follow from conditioning (docs/numerics.md "Linear algebra"): the matrices are random
and well conditioned (κ measured per case), a backward-stable fp32 algorithm has a residual of
order n·u·‖A‖·‖x‖ (u = 2⁻²⁴), and two such algorithms (trn's and LAPACK's) differ in the
solution by order κ·n·u. The checks allow a constant of 20 (`_C`) on those orders.
"""

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
from jax import lax

from compiler_harness import compile_code, run_program

U = 2.0 ** -24
_C = 20.0
SIZES = [1, 2, 3, 17, 64, 130]
BATCHED = [(2, 3), (3, 17)]  # (batch, n)


def _rng(seed):
  return np.random.default_rng(seed)


def _general(n, batch=(), seed=0):
  """A well-conditioned general matrix: Gaussian plus a diagonal shift (κ of order 10)."""
  a = _rng(seed).standard_normal((*batch, n, n)).astype(np.float32)
  return a + np.float32(2 * np.sqrt(n)) * np.eye(n, dtype=np.float32)


def _spd(n, batch=(), seed=0):
  """A well-conditioned symmetric positive definite matrix (κ of order 10)."""
  a = _rng(seed).standard_normal((*batch, n, n)).astype(np.float32)
  return (a @ np.swapaxes(a, -1, -2) / n + np.eye(n, dtype=np.float32)).astype(np.float32)


def _symmetric(n, batch=(), seed=0):
  a = _rng(seed).standard_normal((*batch, n, n)).astype(np.float32)
  return ((a + np.swapaxes(a, -1, -2)) / 2).astype(np.float32)


def _kappa(a):
  return float(np.max(np.linalg.cond(np.asarray(a, np.float64))))


def _norm(x):
  return float(np.max(np.linalg.norm(np.asarray(x, np.float64).reshape(-1, *x.shape[-2:]),
                                     axis=(-2, -1)))) if np.ndim(x) >= 2 else float(
                                         np.max(np.abs(x)))


def _on(device, f, *args):
  return jax.jit(f)(*[jax.device_put(a, device) for a in args])


def _both(trn, cpu, f, *args):
  out_trn = jax.tree.map(np.asarray, _on(trn, f, *args))
  out_cpu = jax.tree.map(np.asarray, _on(cpu, f, *args))
  return out_trn, out_cpu


def _assert_relative(actual, expected, bound, what):
  actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
  scale = max(float(np.max(np.abs(expected))), 1e-30)
  error = float(np.max(np.abs(actual - expected))) / scale if actual.size else 0.0
  assert error <= bound, f"{what}: relative error {error:.3g} > {bound:.3g}"


def _assert_identity(product, n, bound, what):
  error = float(np.max(np.abs(np.asarray(product, np.float64) - np.eye(n))))
  assert error <= bound, f"{what}: ‖· − I‖_max {error:.3g} > {bound:.3g}"


def _id(case):
  n, batch = case
  return f"{'x'.join(map(str, batch)) + 'x' if batch else ''}{n}"


def _cases(sizes):
  """(n, batch) cases; n ≥ 64 behind the slow marker (JAX's LU unrolls its 64-step loop: ~7 s
  to compile)."""
  cases = [(n, ()) for n in sizes] + [(n, (b,)) for b, n in BATCHED]
  return [pytest.param(c, id=_id(c), marks=[pytest.mark.slow] if c[0] >= 64 else [])
          for c in cases]


CASES = pytest.mark.parametrize("case", _cases(SIZES))


@CASES
def test_cholesky_matches_cpu_and_reconstructs(trn, cpu, case):
  n, batch = case
  a = _spd(n, batch)
  factor, reference = _both(trn, cpu, jnp.linalg.cholesky, a)
  _assert_relative(factor, reference, _C * n * _kappa(a) * U, "L vs CPU")
  _assert_relative(factor @ np.swapaxes(factor, -1, -2), a, _C * n * U, "L·Lᵀ vs A")
  assert np.all(np.triu(factor, 1) == 0)


def test_cholesky_of_a_matrix_that_is_not_positive_definite_is_nan_like_cpu(trn, cpu):
  a = np.stack([_spd(4), -np.eye(4, dtype=np.float32)])
  factor, reference = _both(trn, cpu, jnp.linalg.cholesky, a)
  np.testing.assert_array_equal(np.isnan(factor), np.isnan(reference))
  # The whole factor of the failing matrix is NaN (jnp.linalg.cholesky then zeroes the upper
  # triangle); the other matrix of the batch is factored.
  assert not np.isnan(factor[0]).any() and np.isnan(factor[1][np.tril_indices(4)]).all()


def test_cholesky_upper_reads_only_the_upper_triangle():
  """stablehlo.cholesky lower = false (JAX always asks for lower; torch_xla and hand-written
  StableHLO may not): U with A = UᵀU, from A's upper triangle only."""
  a = _spd(5)
  garbage = a.copy()
  garbage[np.tril_indices(5, -1)] = np.nan
  text = ("func.func @main(%a: tensor<5x5xf32>) -> tensor<5x5xf32> {\n"
          "  %0 = stablehlo.cholesky %a, lower = false : tensor<5x5xf32>\n"
          "  return %0 : tensor<5x5xf32>\n}\n")
  (upper,) = run_program(compile_code(text.encode()), [garbage])
  expected = np.linalg.cholesky(a.astype(np.float64)).T
  _assert_relative(upper, expected, _C * 5 * _kappa(a) * U, "U vs LAPACK")
  assert np.all(np.tril(upper, -1) == 0)


_FORMS = [(left, lower, transpose, unit) for left in (True, False) for lower in (True, False)
          for transpose in (False, True) for unit in (False, True)]


@pytest.mark.parametrize("left,lower,transpose,unit", _FORMS)
def test_triangular_solve_every_form_matches_cpu(trn, cpu, left, lower, transpose, unit):
  n, k = 17, 3
  a = _general(n, (2,))
  # The triangle not named by `lower` (and the diagonal when unit) must never be read.
  a = np.where(np.tril(np.ones((n, n), bool)) if lower else np.triu(np.ones((n, n), bool)),
               a, np.nan).astype(np.float32)
  if unit:
    a = np.where(np.eye(n, dtype=bool), np.nan, a).astype(np.float32)
  b = _rng(1).standard_normal((2, n, k) if left else (2, k, n)).astype(np.float32)
  f = lambda a, b: lax.linalg.triangular_solve(a, b, left_side=left, lower=lower,
                                               transpose_a=transpose, unit_diagonal=unit)
  x, reference = _both(trn, cpu, f, a, b)
  clean = np.nan_to_num(a, nan=0.0)
  if unit:
    clean = clean + np.eye(n, dtype=np.float32)
  _assert_relative(x, reference, _C * n * _kappa(clean) * U, "x vs CPU")



@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose,conjugate", [(False, False), (True, False), (True, True)],
                         ids=["none", "transpose", "adjoint"])
def test_complex_triangular_solve_matches_cpu(trn, cpu, left, lower, transpose, conjugate):
  # decompose-complex-triangular-solve: the substitution loop on complex64, then float32 pairs;
  # ADJOINT conjugates a, TRANSPOSE does not.
  n, k = 17, 3
  a = (_general(n, (2,)) + 1j * _general(n, (2,), seed=2)).astype(np.complex64)
  b = (_rng(1).standard_normal((2, n, k) if left else (2, k, n))
       + 1j * _rng(3).standard_normal((2, n, k) if left else (2, k, n))).astype(np.complex64)
  f = lambda a, b: lax.linalg.triangular_solve(a, b, left_side=left, lower=lower,
                                               transpose_a=transpose, conjugate_a=conjugate)
  x, reference = _both(trn, cpu, f, a, b)
  error = np.max(np.abs(x.astype(np.complex128) - reference)) / np.max(np.abs(reference))
  triangle = (np.tril(a) if lower else np.triu(a)).astype(np.complex128)
  assert error <= _C * n * float(np.max(np.linalg.cond(triangle))) * U, error

@CASES
def test_solve_triangular_and_cho_solve_residuals(trn, cpu, case):
  n, batch = case
  a = _spd(n, batch)
  b = _rng(2).standard_normal((*batch, n, 4)).astype(np.float32)

  def f(a, b):
    factor = jnp.linalg.cholesky(a)
    return (jsl.solve_triangular(factor, b, lower=True),
            jsl.cho_solve((factor, True), b))
  (y, x), (y_cpu, x_cpu) = _both(trn, cpu, f, a, b)
  kappa = _kappa(a)
  _assert_relative(y, y_cpu, _C * n * kappa * U, "solve_triangular vs CPU")
  _assert_relative(x, x_cpu, _C * n * kappa * U, "cho_solve vs CPU")
  _assert_relative(a @ x, b, _C * n * kappa * U, "A·x vs b")


@CASES
def test_solve_inv_det_slogdet_match_cpu(trn, cpu, case):
  n, batch = case
  a = _general(n, batch)
  b = _rng(3).standard_normal((*batch, n, 2)).astype(np.float32)

  def f(a, b):
    sign, logdet = jnp.linalg.slogdet(a)
    return jnp.linalg.solve(a, b), jnp.linalg.inv(a), sign, logdet
  (x, inv, sign, logdet), reference = _both(trn, cpu, f, a, b)
  bound = _C * n * _kappa(a) * U
  _assert_relative(x, reference[0], bound, "solve vs CPU")
  _assert_relative(a @ x, b, bound, "A·x vs b")
  _assert_relative(inv, reference[1], bound, "inv vs CPU")
  _assert_identity(a.reshape(-1, n, n)[0] @ inv.reshape(-1, n, n)[0], n, bound, "A·inv(A)")
  np.testing.assert_array_equal(sign, reference[2])
  _assert_relative(logdet, reference[3], _C * n * U, "log|det| vs CPU")
  if n <= 17:  # det itself overflows float32 for the larger shifted matrices
    det, det_cpu = _both(trn, cpu, jnp.linalg.det, a)
    _assert_relative(det, det_cpu, _C * n * U, "det vs CPU")


@pytest.mark.parametrize("n", [1, 3, 17])
def test_lu_and_lu_factor_match_cpu(trn, cpu, n):
  a = _general(n)
  b = _rng(4).standard_normal((n, 3)).astype(np.float32)

  def f(a, b):
    p, l, u = jsl.lu(a)
    lu, piv = jsl.lu_factor(a)
    return p, l, u, lu, piv, jsl.lu_solve((lu, piv), b)
  out, reference = _both(trn, cpu, f, a, b)
  bound = _C * n * _kappa(a) * U
  np.testing.assert_array_equal(out[0], reference[0])  # the same pivots (partial pivoting)
  np.testing.assert_array_equal(out[4], reference[4])
  for got, want, what in zip(out[1:4], reference[1:4], ("L", "U", "LU")):
    _assert_relative(got, want, bound, f"{what} vs CPU")
  _assert_relative(out[0] @ out[1] @ out[2], a, _C * n * U, "P·L·U vs A")
  _assert_relative(out[5], reference[5], bound, "lu_solve vs CPU")


def test_matrix_power_matches_cpu(trn, cpu):
  a = (_general(17) / 10).astype(np.float32)
  for power in (0, 1, 3, 8, -2):
    got, want = _both(trn, cpu, lambda a: jnp.linalg.matrix_power(a, power), a)
    _assert_relative(got, want, _C * 17 * abs(power) * _kappa(a) * U + 1e-7, f"a^{power}")


QR_SHAPES = [(1, 1), (2, 2), (3, 3), (17, 5), (5, 17), (64, 64), (130, 130), (130, 17),
             (2, 3, 3), (3, 17, 4)]


@pytest.mark.parametrize("shape", QR_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_qr_matches_cpu_orthogonal_and_reconstructs(trn, cpu, shape, mode):
  a = _rng(5).standard_normal(shape).astype(np.float32)
  (q, r), (q_cpu, r_cpu) = _both(trn, cpu, lambda a: jnp.linalg.qr(a, mode=mode), a)
  m, n = shape[-2:]
  bound = _C * max(m, n) * _kappa(a) * U
  # Householder with LAPACK's reflector convention: the same signs as the CPU's geqrf.
  _assert_relative(q, q_cpu, bound, "Q vs CPU")
  _assert_relative(r, r_cpu, bound, "R vs CPU")
  k = q.shape[-1]
  for qi in q.reshape(-1, m, k):
    _assert_identity(qi.T @ qi, k, _C * m * U, "QᵀQ")
  _assert_relative(q @ r, a, _C * max(m, n) * U, "Q·R vs A")
  assert np.all(np.tril(r.reshape(-1, *r.shape[-2:]), -1) == 0)


@pytest.mark.parametrize("case", _cases([1, 2, 3, 17, 64]))
def test_eigh_matches_cpu_eigenvalues_and_residual(trn, cpu, case):
  n, batch = case
  a = _symmetric(n, batch)
  (w, v), (w_cpu, _) = _both(trn, cpu, jnp.linalg.eigh, a)
  norm = _norm(a)
  # Eigenvalues are perfectly conditioned (Weyl): |Δλ| ≤ ‖ΔA‖ ~ n·u·‖A‖ for both backends.
  assert np.max(np.abs(w - w_cpu)) <= _C * n * U * norm
  assert np.all(np.diff(w, axis=-1) >= 0)
  residual = a @ v - v * w[..., None, :]
  assert np.max(np.abs(residual)) <= _C * n * U * norm
  for vi in v.reshape(-1, n, n):
    _assert_identity(vi.T @ vi, n, _C * n * U, "VᵀV")


@pytest.mark.slow
def test_eigh_130_residual(trn):
  a = _symmetric(130)
  w, v = jax.tree.map(np.asarray, _on(trn, jnp.linalg.eigh, a))
  assert np.max(np.abs(a @ v - v * w)) <= _C * 130 * U * _norm(a)


def test_eigh_reads_only_the_named_triangle(trn, cpu):
  a = _symmetric(5)
  garbage = np.where(np.triu(np.ones((5, 5), bool), 1), np.float32(1e3), a).astype(np.float32)
  f = lambda a: lax.linalg.eigh(a, lower=True, symmetrize_input=False)[1]
  w, w_cpu = _both(trn, cpu, f, garbage)
  assert np.max(np.abs(w - w_cpu)) <= _C * 5 * U * _norm(a)


def test_eigh_subset_by_index_is_a_slice_of_the_sorted_spectrum(trn):
  """(The CPU backend refuses subset_by_index, so the reference is LAPACK through NumPy.)"""
  a = _symmetric(6)
  middle = lambda a: lax.linalg.eigh(a, subset_by_index=(1, 4))
  v, w = jax.tree.map(np.asarray, _on(trn, middle, a))
  assert v.shape == (6, 3) and w.shape == (3,)
  assert np.max(np.abs(w - np.linalg.eigvalsh(a.astype(np.float64))[1:4])) <= _C * 6 * U * _norm(a)
  assert np.max(np.abs(a @ v - v * w)) <= _C * 6 * U * _norm(a)


@pytest.mark.parametrize("shape", [
    pytest.param(shape, id="x".join(map(str, shape)),
                 marks=[] if shape == (5, 17) else [pytest.mark.slow])  # ~7 s each
    for shape in [(1, 1), (3, 3), (17, 5), (5, 17), (2, 6, 4)]])
def test_svd_pinv_lstsq_match_cpu(trn, cpu, shape):
  a = _rng(6).standard_normal(shape).astype(np.float32)
  (u, s, vh), (_, s_cpu, _) = _both(trn, cpu, lambda a: jnp.linalg.svd(a, full_matrices=False), a)
  m, n = shape[-2:]
  norm = _norm(a)
  bound = _C * max(m, n) * U * norm * 10  # QDWH polar + Jacobi: two backward-stable stages
  assert np.max(np.abs(s - s_cpu)) <= bound  # singular values: Weyl, as for eigenvalues
  _assert_relative((u * s[..., None, :]) @ vh, a, bound / norm, "U·S·Vh vs A")
  pinv, pinv_cpu = _both(trn, cpu, jnp.linalg.pinv, a)
  _assert_relative(pinv, pinv_cpu, _C * max(m, n) * _kappa(a) * U * 10, "pinv vs CPU")
  if a.ndim == 2:
    b = _rng(7).standard_normal((m, 2)).astype(np.float32)
    x, x_cpu = _both(trn, cpu, lambda a, b: jnp.linalg.lstsq(a, b)[0], a, b)
    _assert_relative(x, x_cpu, _C * max(m, n) * _kappa(a) ** 2 * U * 10, "lstsq vs CPU")


def test_gradients_match_cpu(trn, cpu):
  a, spd, sym = _general(5), _spd(5), _symmetric(5)
  b = _rng(8).standard_normal((5, 2)).astype(np.float32)
  losses = {
      "solve": lambda a: jnp.sum(jnp.linalg.solve(a, b) ** 2),
      "slogdet": lambda a: jnp.linalg.slogdet(a)[1],
      "inv": lambda a: jnp.sum(jnp.linalg.inv(a)),
      "cholesky": lambda a: jnp.sum(jnp.linalg.cholesky(spd + 0.01 * (a + a.T))),
      "qr": lambda a: jnp.sum(jnp.linalg.qr(a)[1] ** 2),
      "eigh": lambda a: jnp.sum(jnp.linalg.eigvalsh(sym + 0.1 * (a + a.T)) ** 3),
  }
  for name, loss in losses.items():
    got, want = _both(trn, cpu, jax.grad(loss), a)
    _assert_relative(got, want, _C * 5 * _kappa(a) ** 2 * U * 10, f"grad {name}")


@pytest.mark.parametrize("call,replacement", [
    (lambda a: jnp.linalg.eig(a), "jnp.linalg.eigh"),
    (lambda a: jsl.schur(a), "jnp.linalg.eigh"),
    (lambda a: jsl.hessenberg(a), "on the CPU"),
    (lambda a: jsl.qr(a, pivoting=True), "pivoting=False"),
], ids=["eig", "schur", "hessenberg", "qr-pivoting"])
def test_linalg_without_a_portable_algorithm_is_refused_by_name(trn, call, replacement):
  a = jax.device_put(_general(4), trn)
  with pytest.raises(NotImplementedError, match="not supported on trn") as info:
    jax.jit(call)(a)
  assert replacement in str(info.value)


@pytest.mark.parametrize("cell", ["LSTMCell", "GRUCell"])
def test_flax_recurrent_cells_initialise_and_run(trn, cpu, cell):
  """Their default recurrent kernel init is nn.initializers.orthogonal (QR of a Gaussian)."""
  from flax import linen as nn
  module = getattr(nn, cell)(features=8)
  x = _rng(9).standard_normal((2, 4)).astype(np.float32)

  def run(x):
    carry = module.initialize_carry(jax.random.key(0), x.shape)
    params = module.init(jax.random.key(1), carry, x)
    return params, module.apply(params, carry, x)
  got, want = _both(trn, cpu, run, x)
  for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    _assert_relative(g, w, _C * 12 * U * 10, cell)
  recurrent = [k for k in jax.tree.leaves(got[0]) if k.ndim == 2 and k.shape == (8, 8)]
  assert recurrent
  for kernel in recurrent:
    _assert_identity(kernel.T @ kernel, 8, _C * 8 * U, "orthogonal kernel")
