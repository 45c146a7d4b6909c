"""Emitting batched matrix algorithms as IR: what the linear-algebra decompositions
(decompose-cholesky, decompose-triangular-solve, decompose-householder-qr) build their loops from.

Like XLA's expanders (xla/service/cholesky_expander.cc, triangular_solve_expander.cc,
qr_expander.cc), the algorithms are written over plain ops the lowering rules already handle:
a `stablehlo.while` counting 0..trips (`fori`), dynamic_slice/dynamic_update_slice at the loop
counter, dot_general with one batch dim, iota masks and elementwise ops. Every matrix is rank 3,
[batch, rows, cols]: `batched` folds an operand's leading dims into one (a reshape moves no
data) and `unbatched` restores them.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from hlo_lowering.ir import Block, Op, Region, TensorType, Value
from hlo_lowering.passes.expansion import Emitter
from hlo_lowering.program import DType

S32 = DType.S32


class MatrixEmitter(Emitter):
  """An Emitter with the matrix ops and the counted loop the linalg decompositions use.

  Inside a loop body (`outer` is the emitter of the code around the loop) iotas are emitted
  outside, once per shape: they are loop-invariant, and each one costs GpSimd instructions."""

  def __init__(self, op: Op, new_ops: list[Op], outer: "MatrixEmitter | None" = None):
    super().__init__(op, new_ops)
    self.outer = outer
    self._iotas: dict[tuple, Value] = {}

  def scalar(self, value, dtype: DType) -> Value:
    return self.emit("stablehlo.constant", [], (), dtype,
                     {"value": np.array(value).astype(dtype.numpy)})

  def reshape(self, x: Value, shape) -> Value:
    return self.emit("stablehlo.reshape", [x], shape, x.dtype)

  def transpose(self, x: Value, permutation) -> Value:
    shape = [x.shape[d] for d in permutation]
    return self.emit("stablehlo.transpose", [x], shape, x.dtype,
                     {"permutation": list(permutation)})

  def swap_last_dims(self, x: Value) -> Value:
    return self.transpose(x, (0, 2, 1))

  def broadcast(self, x: Value, shape, dims) -> Value:
    return self.emit("stablehlo.broadcast_in_dim", [x], shape, x.dtype,
                     {"broadcast_dimensions": list(dims)})

  def unary(self, name: str, x: Value) -> Value:
    return self.emit(f"stablehlo.{name}", [x], x.shape, x.dtype)

  def convert(self, x: Value, dtype: DType) -> Value:
    return self.emit("stablehlo.convert", [x], x.shape, dtype)

  def iota(self, shape, dim: int) -> Value:
    if self.outer is not None:
      return self.outer.iota(shape, dim)
    key = (tuple(shape), dim)
    if key not in self._iotas:
      self._iotas[key] = self.emit("stablehlo.iota", [], shape, S32, {"iota_dimension": dim})
    return self._iotas[key]

  def index_compare(self, shape, dim: int, direction: str, other: Value | int) -> Value:
    """pred[shape]: (index along `dim`) `direction` `other` (a scalar s32 value or an int)."""
    if isinstance(other, int):
      rhs = self.splat(other, S32, shape)
    else:
      rhs = self.broadcast(other, shape, [])
    return self.compare(direction, self.iota(shape, dim), rhs, "SIGNED")

  def row_column_compare(self, shape, direction: str) -> Value:
    """pred[B, m, n]: row index `direction` column index (EQ: the diagonal, GT: the strict
    lower triangle, ...)."""
    return self.compare(direction, self.iota(shape, 1), self.iota(shape, 2), "SIGNED")

  def dynamic_slice(self, x: Value, starts: list[Value], sizes) -> Value:
    return self.emit("stablehlo.dynamic_slice", [x, *starts], sizes, x.dtype,
                     {"slice_sizes": list(sizes)})

  def dynamic_update_slice(self, x: Value, update: Value, starts: list[Value]) -> Value:
    return self.emit("stablehlo.dynamic_update_slice", [x, update, *starts], x.shape, x.dtype)

  def batched_dot(self, lhs: Value, rhs: Value, lhs_contract: int, rhs_contract: int) -> Value:
    """[B, a, b] x [B, c, d] contracting one dim of each, batch dim 0: [B, free lhs, free rhs]."""
    free = [lhs.shape[d] for d in (1, 2) if d != lhs_contract]
    free += [rhs.shape[d] for d in (1, 2) if d != rhs_contract]
    dims = {"lhs_batching_dimensions": [0], "rhs_batching_dimensions": [0],
            "lhs_contracting_dimensions": [lhs_contract],
            "rhs_contracting_dimensions": [rhs_contract]}
    return self.emit("stablehlo.dot_general", [lhs, rhs], (lhs.shape[0], *free), lhs.dtype,
                     {"dot_dimension_numbers": dims})

  def sum(self, x: Value, dims) -> Value:
    """Σ x over `dims` (a reduce with an add body)."""
    scalar = TensorType((), x.dtype)
    a, b = Value(scalar), Value(scalar)
    add = Op("stablehlo.add", [a, b], [scalar], loc=self.op.loc)
    ret = Op("stablehlo.return", [add.result], [], loc=self.op.loc)
    shape = [n for d, n in enumerate(x.shape) if d not in dims]
    new = Op("stablehlo.reduce", [x, self.scalar(0, x.dtype)], [TensorType(tuple(shape), x.dtype)],
             {"dimensions": list(dims), "reducer": "add"}, [Region(Block([a, b], [add, ret]))],
             self.op.loc)
    self.new_ops.append(new)
    return new.result

  def fori(self, trips: int, init: list[Value],
           body: Callable[["MatrixEmitter", Value, list[Value]], list[Value]]) -> list[Value]:
    """A while loop over i = 0..trips-1 carrying `init`; `body(e, i, carried)` emits one
    iteration through `e` and returns the new carried values. Returns the final ones."""
    counter = TensorType((), S32)
    cond_args = [Value(counter)] + [Value(v.type) for v in init]
    cond_ops: list[Op] = []
    top = self.outer or self
    cond = MatrixEmitter(self.op, cond_ops, top)
    more = cond.compare("LT", cond_args[0], cond.scalar(trips, S32), "SIGNED")
    cond_ops.append(Op("stablehlo.return", [more], [], loc=self.op.loc))

    body_args = [Value(counter)] + [Value(v.type) for v in init]
    body_ops: list[Op] = []
    inner = MatrixEmitter(self.op, body_ops, top)
    carried = body(inner, body_args[0], body_args[1:])
    step = inner.binary("add", body_args[0], inner.scalar(1, S32))
    body_ops.append(Op("stablehlo.return", [step, *carried], [], loc=self.op.loc))

    loop = Op("stablehlo.while", [self.scalar(0, S32), *init],
              [counter] + [v.type for v in init], {},
              [Region(Block(cond_args, cond_ops)), Region(Block(body_args, body_ops))],
              self.op.loc)
    self.new_ops.append(loop)
    return loop.results[1:]

  def batched(self, x: Value) -> Value:
    """[..., m, n] as [B, m, n] (B = the product of the leading dims, 1 when there are none)."""
    *lead, m, n = x.shape
    return self.reshape(x, (math.prod(lead), m, n))

  def unbatched(self, x: Value, like: TensorType) -> Value:
    """A [B, m, n] result back in the shape `like` has."""
    return self.reshape(x, like.shape)

  def zero_index(self) -> Value:
    return self.scalar(0, S32)
