"""cancel-transposes: a transpose whose result holds an earlier value's elements in that value's
own order (its permutation undoes the transposes before it) → a reshape of that value.

Why: JAX's gradient of `k.transpose(0, 1, 3, 2)` in attention is `transpose(broadcast_in_dim(
transpose(dot_general(dS, q))))`: the inner transpose makes dKᵀ, a unit-dim broadcast adds the
batch dim back, the outer one makes dK again. Neither transpose is of a dot_general's direct
result and the outer one reorders the innermost dim, so it lowered to a GpSimd copy through HBM
(365 µs of each core's GpSimd in the transformer block at seq 2048) and made the dot produce the
dKᵀ layout. Walking back through the chain of pure data movement that keeps every element (a
transpose, a broadcast_in_dim or reshape that only adds or drops size-one dims) gives, for each
dim of the result of size > 1, the dim of the earlier value it is; when those come in the
earlier value's order, the result is that value reshaped: no data moves.

Requires: calls inlined.
Ensures: no stablehlo.transpose (in any block, regions included) is the end of such a chain
back to a value (of the same block, or an argument of it) whose elements it holds in order; each
is a stablehlo.reshape of that value with the transpose's result value and location. The ops
the chain went through stay (canonicalize removes those left without users).
Runs after: the decompose passes; before canonicalize (which removes the dead chain) and
fold-transpose-into-dot (which then sees the dot_general's own users).
"""

from __future__ import annotations

import math
from typing import Iterator

from hlo_lowering.ir import Block, Module, Op, Value, control_flow_blocks


def _source_dims(op: Op) -> list[int | None] | None:
  """For each result dim of `op`, the operand dim it is (None: a dim of size one that the op
  added); None when `op` does not move every element unchanged."""
  if op.name == "stablehlo.transpose":
    return list(op.attrs["permutation"])
  if op.name not in ("stablehlo.broadcast_in_dim", "stablehlo.reshape"):
    return None
  operand, result = op.operands[0].shape, op.result.shape
  if math.prod(operand) != math.prod(result):
    return None
  if op.name == "stablehlo.broadcast_in_dim":
    dims: list[int | None] = [None] * len(result)
    for j, d in enumerate(op.attrs["broadcast_dimensions"]):
      dims[d] = j
    return dims
  kept = [d for d, size in enumerate(operand) if size != 1]
  made = [d for d, size in enumerate(result) if size != 1]
  if [operand[d] for d in kept] != [result[d] for d in made]:
    return None  # a reshape that regroups dims
  dims = [None] * len(result)
  for d, j in zip(made, kept):
    dims[d] = j
  return dims


def in_order_source(transpose: Op, producers: dict[Value, Op]) -> Value | None:
  """The earliest value of the chain ending in `transpose` whose elements its result holds in
  their own order, or None."""
  shape = transpose.result.shape
  # For each result dim of size > 1, the dim of the value reached so far it is.
  dims = [d for d, size in enumerate(shape) if size != 1]
  op, found = transpose, None
  while True:
    moved = _source_dims(op)
    if moved is None:
      return found
    dims = [moved[d] for d in dims]
    value = op.operands[0]
    if dims == sorted(dims):
      found = value
    op = producers.get(value)
    if op is None:
      return found


def cancellable(block: Block) -> Iterator[tuple[int, Op, Value]]:
  """(index, transpose, its in-order source) of the transposes of `block` that cancel, in
  order; a rewrite of one (at its index) before the next is asked for is seen by the next."""
  producers: dict[Value, Op] = {}
  for i in range(len(block.ops)):
    op = block.ops[i]
    if op.name == "stablehlo.transpose":
      source = in_order_source(op, producers)
      if source is not None:
        yield i, op, source
        op = block.ops[i]
    for result in op.results:
      producers[result] = op


def run(module: Module) -> None:
  for function in module.functions.values():
    for block in control_flow_blocks(function.body):
      for i, transpose, source in cancellable(block):
        reshape = Op("stablehlo.reshape", [source], [transpose.result.type], loc=transpose.loc)
        # The reshape defines the transpose's value, so its users need no rewriting.
        reshape.results = [transpose.result]
        block.ops[i] = reshape
