"""decompose-householder-qr: the two custom calls JAX emits for QR on a platform with no QR
library — `Qr` (lax.linalg.geqrf: the Householder factorization in LAPACK's compact form) and
`ProductOfElementaryHouseholderReflectors` (householder_product: LAPACK's orgqr) — become
loops over the reflectors in the ops the lowering rules already handle, as XLA's QrExpander
does for them.

geqrf, a [..., m, n] → (a', taus [..., k]), k = min(m, n): step j builds the reflector
H = I − τ·v·vᵀ of the column x = A[j:, j] as LAPACK's dlarfg does (α = x[0], σ² = ‖x[1:]‖²;
σ² = 0: τ = 0, H = I; else β = −sign(α)·sqrt(α² + σ²), τ = (β − α)/β, v = [1, x[1:]/(α − β)];
sign(0) = +), applies it to the columns right of j (A ← A − τ·v·(vᵀA), two batched dots), and
stores β on the diagonal, v[1:] below it and τ in taus[j]. a' holds R in its upper triangle,
as LAPACK's geqrf (JAX's CPU backend) leaves it.
householder_product, (a [..., m, n], taus [..., k]) → Q [..., m, n] = H_0·…·H_{k−1}·I[:, :n],
accumulated from the last reflector to the first (Q ← Q − τ_j·v_j·(v_jᵀQ)), v_j read from
column j of `a` below the diagonal (the diagonal taken as 1, above it as 0).

Numerics (no rescaling of tiny or huge columns as dlarfg's safmin loop does):
docs/numerics.md "Linear algebra".

Requires: calls inlined (inline-calls).
Ensures: no custom_call to `Qr` or `ProductOfElementaryHouseholderReflectors` is left (also
inside while/case/if regions); each is one stablehlo.while of k trips; each new op keeps the
call's location; a non-float operand or shapes geqrf/orgqr do not take are a CompileError naming
the call. Other custom calls are left for check-supported.
Runs after: unroll-static-loops (the reflector loops stay loops), before canonicalize and
fuse-elementwise.
"""

from __future__ import annotations

from hlo_lowering.errors import CompileError
from hlo_lowering.ir import Module, Op, Value
from hlo_lowering.passes.expansion import expand_ops
from hlo_lowering.passes.matrix_emitter import MatrixEmitter

GEQRF = "Qr"
HOUSEHOLDER_PRODUCT = "ProductOfElementaryHouseholderReflectors"


def _column(e: MatrixEmitter, a: Value, j: Value) -> Value:
  batch, m, _ = a.shape
  zero = e.zero_index()
  return e.dynamic_slice(a, [zero, zero, j], (batch, m, 1))


def _per_matrix(e: MatrixEmitter, scalars: Value, shape) -> Value:
  """[B, 1, 1] broadcast to `shape` ([B, ...])."""
  return e.broadcast(e.reshape(scalars, (scalars.shape[0],)), shape, [0])


def _reflect(e: MatrixEmitter, a: Value, v: Value, tau: Value, columns_from: Value | None):
  """(I − τ·v·vᵀ)·a, changing only the columns ≥ `columns_from` (all when None)."""
  w = e.batched_dot(v, a, 1, 1)  # vᵀa: [B, 1, n]
  if columns_from is not None:
    keep = e.index_compare(w.shape, 2, "GE", columns_from)
    w = e.select(keep, w, e.splat(0, w.dtype, w.shape))
  w = e.binary("multiply", w, _per_matrix(e, tau, w.shape))
  return e.binary("subtract", a, e.batched_dot(v, w, 2, 1))


def geqrf(e: MatrixEmitter, a: Value) -> tuple[Value, Value]:
  """(a', taus [B, 1, k]) of [B, m, n] `a`."""
  batch, m, n = a.shape
  k = min(m, n)
  zero = e.zero_index()
  dtype = a.dtype

  def step(e: MatrixEmitter, j: Value, carried: list[Value]) -> list[Value]:
    a, taus = carried
    col = _column(e, a, j)
    shape = col.shape
    zeros = e.splat(0, dtype, shape)
    below = e.index_compare(shape, 1, "GT", j)
    tail = e.select(below, col, zeros)
    alpha = e.dynamic_slice(col, [zero, j, zero], (batch, 1, 1))
    sigma2 = e.reshape(e.sum(e.binary("multiply", tail, tail), [1, 2]), (batch, 1, 1))
    scalar_zero = e.splat(0, dtype, (batch, 1, 1))
    trivial = e.compare("EQ", sigma2, scalar_zero, "FLOAT")
    norm = e.unary("sqrt", e.binary("add", e.binary("multiply", alpha, alpha), sigma2))
    nonnegative = e.compare("GE", alpha, scalar_zero, "FLOAT")
    beta = e.select(nonnegative, e.unary("negate", norm), norm)
    beta = e.select(trivial, alpha, beta)
    tau = e.binary("divide", e.binary("subtract", beta, alpha), beta)
    tau = e.select(trivial, scalar_zero, tau)
    scale = e.binary("divide", e.splat(1, dtype, (batch, 1, 1)), e.binary("subtract", alpha, beta))
    v_tail = e.binary("multiply", tail, _per_matrix(e, scale, shape))
    v_tail = e.select(_per_matrix(e, trivial, shape), zeros, v_tail)
    diagonal = e.index_compare(shape, 1, "EQ", j)
    v = e.select(diagonal, e.splat(1, dtype, shape), v_tail)
    next_column = e.binary("add", j, e.scalar(1, j.dtype))
    a = _reflect(e, a, v, tau, next_column)
    above = e.index_compare(shape, 1, "LT", j)
    stored = e.select(above, col, e.select(diagonal, _per_matrix(e, beta, shape), v_tail))
    a = e.dynamic_update_slice(a, stored, [zero, zero, j])
    taus = e.dynamic_update_slice(taus, tau, [zero, zero, j])
    return [a, taus]

  a, taus = e.fori(k, [a, e.splat(0, dtype, (batch, 1, k))], step)
  return a, taus


def householder_product(e: MatrixEmitter, a: Value, taus: Value) -> Value:
  """Q [B, m, n] from the reflectors stored in [B, m, n] `a` and [B, 1, k] `taus`."""
  batch = a.shape[0]
  k = taus.shape[2]
  zero = e.zero_index()
  dtype = a.dtype
  identity = e.convert(e.row_column_compare(a.shape, "EQ"), dtype)

  def step(e: MatrixEmitter, t: Value, carried: list[Value]) -> list[Value]:
    (q,) = carried
    j = e.binary("subtract", e.scalar(k - 1, t.dtype), t)
    col = _column(e, a, j)
    shape = col.shape
    v = e.select(e.index_compare(shape, 1, "GT", j), col, e.splat(0, dtype, shape))
    v = e.select(e.index_compare(shape, 1, "EQ", j), e.splat(1, dtype, shape), v)
    tau = e.dynamic_slice(taus, [zero, zero, j], (batch, 1, 1))
    return [_reflect(e, q, v, tau, None)]

  (q,) = e.fori(k, [identity], step)
  return q


def _target(op: Op) -> str:
  return str(op.attrs.get("call_target_name", ""))


def _check(op: Op) -> None:
  a = op.operands[0]
  ok = a.dtype.is_float and a.type.rank >= 2 and all(v.dtype == a.dtype for v in op.operands)
  if _target(op) == GEQRF:
    ok = ok and len(op.operands) == 1 and len(op.results) == 2
  else:
    taus = op.operands[1] if len(op.operands) == 2 else None
    ok = (ok and taus is not None and len(op.results) == 1 and a.shape[-2] >= a.shape[-1]
          and taus.shape[:-1] == a.shape[:-2] and taus.shape[-1] <= a.shape[-1])
  if not ok:
    raise CompileError(f"{op.describe()}: custom call {_target(op)!r} takes a batch of float "
                       f"matrices (and, for the Householder product, their taus)")


def _expand(op: Op, e: MatrixEmitter) -> list[Value] | None:
  if op.name != "stablehlo.custom_call" or _target(op) not in (GEQRF, HOUSEHOLDER_PRODUCT):
    return None
  _check(op)
  a = op.operands[0]
  if _target(op) == GEQRF:
    if a.type.size == 0:
      return [a, e.splat(0, a.dtype, op.results[1].shape)]
    factors, taus = geqrf(e, e.batched(a))
    return [e.unbatched(factors, op.results[0].type), e.reshape(taus, op.results[1].shape)]
  taus = op.operands[1]
  a = e.batched(a)
  if a.type.size == 0 or taus.shape[-1] == 0:  # no reflectors: Q = I[:, :n]
    q = e.convert(e.row_column_compare(a.shape, "EQ"), a.dtype)
  else:
    q = householder_product(e, a, e.reshape(taus, (a.shape[0], 1, taus.shape[-1])))
  return [e.unbatched(q, op.results[0].type)]


def run(module: Module) -> None:
  expand_ops(module, _expand, MatrixEmitter)
