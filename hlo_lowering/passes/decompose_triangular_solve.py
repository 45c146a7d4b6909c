"""decompose-triangular-solve: stablehlo.triangular_solve becomes a substitution loop over the
rows of the solution, in the ops the lowering rules already handle (as XLA's
TriangularSolveExpander does for backends without a TRSM kernel).

Every form is first brought to "left side, no transpose": x·op(a) = b is op(a)ᵀ·xᵀ = bᵀ (b is
transposed in and the solution out), and op(a) = aᵀ (TRANSPOSE, or ADJOINT, which is the same
for real types) is the transposed matrix with `lower` flipped. Then a·x = b with a lower
(forward substitution, rows 0..m-1) or upper (back substitution, rows m-1..0): row i of x is
(b[i] − T[i, :]·x) / a[i, i], where T is a's strict triangle (the other triangle and the
diagonal masked to zero up front, so whatever they hold — NaN included — is never read) and the
rows of x not solved yet are still zero. unit_diagonal divides by 1 (a's diagonal is not read).

A zero on the diagonal gives Inf/NaN in the rows that depend on it, as LAPACK's trsm (JAX's
CPU backend) does. Numerics: docs/numerics.md "Linear algebra".

complex64 solves are expanded earlier, by `run_complex` (the pipeline's
decompose-complex-triangular-solve, before decompose-complex, which then computes the loop on
float32 pairs); ADJOINT conjugates a first. `run` leaves none for them.

Requires: calls inlined (inline-calls).
Ensures: no stablehlo.triangular_solve is left (also inside while/case/if regions); each solve
is one stablehlo.while of m trips; each new op keeps the solve's location; a non-float operand
or mismatched shapes are a CompileError naming the op.
Runs after: unroll-static-loops (the row loop stays a loop), before canonicalize and
fuse-elementwise; run_complex: after strip-single-device-sharding, before decompose-complex.
"""

from __future__ import annotations

from hlo_lowering.errors import CompileError
from hlo_lowering.ir import Module, Op, Value
from hlo_lowering.passes.expansion import expand_ops
from hlo_lowering.passes.matrix_emitter import MatrixEmitter
from hlo_lowering.program import DType

_NAME = "stablehlo.triangular_solve"


def _transposes(op: Op) -> bool:
  text = str(op.attrs.get("transpose_a", "NO_TRANSPOSE"))
  return "NO_TRANSPOSE" not in text


def _adjoint(op: Op) -> bool:
  return "ADJOINT" in str(op.attrs.get("transpose_a", ""))


def _conjugate(e: MatrixEmitter, a: Value) -> Value:
  real = e.emit("stablehlo.real", [a], a.shape, DType.F32)
  imag = e.emit("stablehlo.imag", [a], a.shape, DType.F32)
  return e.emit("stablehlo.complex", [real, e.unary("negate", imag)], a.shape, DType.C64)


def solve_left(e: MatrixEmitter, a: Value, b: Value, lower: bool, unit_diagonal: bool) -> Value:
  """x with a·x = b for [B, m, m] triangular `a` (its `lower` or upper triangle) and [B, m, k]
  `b`."""
  batch, m, k = b.shape
  zero = e.zero_index()
  strict = e.row_column_compare(a.shape, "GT" if lower else "LT")
  triangle = e.select(strict, a, e.splat(0, a.dtype, a.shape))
  if unit_diagonal:
    diagonal = e.splat(1, a.dtype, (batch, m, 1))
  else:
    on_diagonal = e.row_column_compare(a.shape, "EQ")
    diagonal = e.sum(e.select(on_diagonal, a, e.splat(0, a.dtype, a.shape)), [2])
    diagonal = e.reshape(diagonal, (batch, m, 1))

  def row(e: MatrixEmitter, t: Value, carried: list[Value]) -> list[Value]:
    (x,) = carried
    i = t if lower else e.binary("subtract", e.scalar(m - 1, t.dtype), t)
    known = e.batched_dot(e.dynamic_slice(triangle, [zero, i, zero], (batch, 1, m)), x, 2, 1)
    rhs = e.binary("subtract", e.dynamic_slice(b, [zero, i, zero], (batch, 1, k)), known)
    pivot = e.dynamic_slice(diagonal, [zero, i, zero], (batch, 1, 1))
    pivot = e.broadcast(e.reshape(pivot, (batch,)), rhs.shape, [0])
    return [e.dynamic_update_slice(x, e.binary("divide", rhs, pivot), [zero, i, zero])]

  (x,) = e.fori(m, [e.splat(0, b.dtype, b.shape)], row)
  return x


def _check(op: Op) -> None:
  a, b = op.operands
  left = bool(op.attrs.get("left_side", False))
  ok = ((a.dtype.is_float or a.dtype == DType.C64) and a.dtype == b.dtype and a.type.rank >= 2
        and a.type.rank == b.type.rank and a.shape[-1] == a.shape[-2]
        and a.shape[:-2] == b.shape[:-2] and b.shape[-2 if left else -1] == a.shape[-1])
  if not ok:
    raise CompileError(f"{op.describe()}: triangular_solve takes a batch of square float "
                       f"(or complex64) matrices a and a matching batch of right-hand sides b")


def _expand(op: Op, e: MatrixEmitter) -> list[Value] | None:
  if op.name != _NAME:
    return None
  _check(op)
  a, b = op.operands
  if b.type.size == 0:
    return [b]
  left = bool(op.attrs.get("left_side", False))
  lower = bool(op.attrs.get("lower", False))
  transpose = _transposes(op)
  a, b = e.batched(a), e.batched(b)
  if not left:  # x·op(a) = b  <=>  op(a)ᵀ·xᵀ = bᵀ
    b, transpose = e.swap_last_dims(b), not transpose
  if _adjoint(op) and a.dtype == DType.C64:
    a = _conjugate(e, a)
  if transpose:
    a, lower = e.swap_last_dims(a), not lower
  x = solve_left(e, a, b, lower, bool(op.attrs.get("unit_diagonal", False)))
  if not left:
    x = e.swap_last_dims(x)
  return [e.unbatched(x, op.results[0].type)]


def run(module: Module) -> None:
  expand_ops(module, _expand, MatrixEmitter)


def run_complex(module: Module) -> None:
  """Only the complex64 solves (decompose-complex-triangular-solve): before decompose-complex,
  which splits the loop's complex values into float32 pairs like any other."""
  expand_ops(module, lambda op, e: _expand(op, e) if op.name == _NAME
             and op.operands[0].dtype == DType.C64 else None, MatrixEmitter)
