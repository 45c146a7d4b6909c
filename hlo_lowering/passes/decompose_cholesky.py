"""decompose-cholesky: stablehlo.cholesky becomes a loop over the columns of the factor, in the
ops the lowering rules already handle (as XLA's CholeskyExpander does for backends without a
Cholesky kernel).

Column-oriented (left-looking) Cholesky of each matrix of the batch, lower = true: L starts at
zero; step j takes the column c = A[:, j] − L · L[j, :]ᵀ (one batched matrix-vector dot_general;
L's columns ≥ j are still zero, so the dot sums exactly the k < j terms), divides it by
sqrt(c[j]) and writes rows ≥ j of it as column j of L. Only A's lower triangle is read; L's
strict upper triangle is zero. lower = false factors Aᵀ (so only A's upper triangle is read) and
returns the transpose, U with A = UᵀU.

Like LAPACK's potrf as JAX's CPU backend calls it, a matrix that is not positive definite (some
pivot c[j] ≤ 0 or NaN) gives a factor that is NaN everywhere (per matrix of the batch), not a
partial factor. Numerics: docs/numerics.md "Linear algebra".

Requires: calls inlined (inline-calls).
Ensures: no stablehlo.cholesky is left (also inside while/case/if regions); the loop is a
stablehlo.while of n trips; each new op keeps the cholesky op's location; a non-float or
non-square operand is a CompileError naming the op.
Runs after: unroll-static-loops (so the column loop stays a loop: n copies of the body would
grow the program and its compile time with n), before canonicalize and fuse-elementwise.
"""

from __future__ import annotations

from hlo_lowering.errors import CompileError
from hlo_lowering.ir import Module, Op, Value
from hlo_lowering.passes.expansion import expand_ops
from hlo_lowering.passes.matrix_emitter import MatrixEmitter

_NAME = "stablehlo.cholesky"


def lower_factor(e: MatrixEmitter, a: Value) -> Value:
  """L with A = L·Lᵀ from the lower triangle of each [B, n, n] matrix of `a` (NaN where not
  positive definite)."""
  batch, n, _ = a.shape
  zero = e.zero_index()

  def column(e: MatrixEmitter, j: Value, carried: list[Value]) -> list[Value]:
    (factor,) = carried
    row = e.dynamic_slice(factor, [zero, j, zero], (batch, 1, n))
    col = e.dynamic_slice(a, [zero, zero, j], (batch, n, 1))
    col = e.binary("subtract", col, e.batched_dot(factor, row, 2, 2))
    pivot = e.dynamic_slice(col, [zero, j, zero], (batch, 1, 1))
    root = e.broadcast(e.reshape(e.unary("sqrt", pivot), (batch,)), col.shape, [0])
    below = e.index_compare(col.shape, 1, "GE", j)
    col = e.select(below, e.binary("divide", col, root), e.splat(0, col.dtype, col.shape))
    return [e.dynamic_update_slice(factor, col, [zero, zero, j])]

  (factor,) = e.fori(n, [e.splat(0, a.dtype, a.shape)], column)
  return _nan_unless_positive_definite(e, factor)


def _nan_unless_positive_definite(e: MatrixEmitter, factor: Value) -> Value:
  """The factor where every diagonal entry is > 0 (NaN fails the compare), else NaN."""
  batch, n, _ = factor.shape
  diagonal = e.row_column_compare(factor.shape, "EQ")
  zeros, ones = e.splat(0, factor.dtype, factor.shape), e.splat(1, factor.dtype, factor.shape)
  positive = e.compare("GT", factor, zeros, "FLOAT")
  failed = e.select(diagonal, e.select(positive, zeros, ones), zeros)
  failures = e.sum(failed, [1, 2])
  ok = e.compare("EQ", failures, e.splat(0, factor.dtype, (batch,)), "FLOAT")
  ok = e.broadcast(ok, factor.shape, [0])
  return e.select(ok, factor, e.splat(float("nan"), factor.dtype, factor.shape))


def _check(op: Op) -> None:
  (a,) = op.operands
  if not a.dtype.is_float or a.type.rank < 2 or a.shape[-1] != a.shape[-2]:
    raise CompileError(f"{op.describe()}: cholesky takes a batch of square float matrices")


def _expand(op: Op, e: MatrixEmitter) -> list[Value] | None:
  if op.name != _NAME:
    return None
  _check(op)
  if op.operands[0].type.size == 0:
    return [op.operands[0]]
  a = e.batched(op.operands[0])
  lower = bool(op.attrs.get("lower", False))
  if lower:
    factor = lower_factor(e, a)
  else:
    factor = e.swap_last_dims(lower_factor(e, e.swap_last_dims(a)))
  return [e.unbatched(factor, op.results[0].type)]


def run(module: Module) -> None:
  expand_ops(module, _expand, MatrixEmitter)
