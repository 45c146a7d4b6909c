"""normalize-dot-general: every dot_general becomes a batch matmul [B,M,K] x [B,K,N] -> [B,M,N].

Requires: calls inlined.
Ensures: each stablehlo.dot_general (also in while/case/if regions) has 3-D operands with batching dims [0]/[0] and contracting
dims [2]/[1] (`is_batch_matmul`); explicit stablehlo.transpose / stablehlo.reshape ops put the
operands in that form (identity ones are not emitted) and a reshape restores the original result
shape (batch dims, lhs free dims, rhs free dims). Tiled and GpSimd matmul rules need only handle
this one form.
Runs after: canonicalize.
"""

from __future__ import annotations

import math

from hlo_lowering.ir import Module, Op, TensorType, Value, control_flow_blocks, replace_uses

CANONICAL = {"lhs_batching_dimensions": [0], "rhs_batching_dimensions": [0],
             "lhs_contracting_dimensions": [2], "rhs_contracting_dimensions": [1]}


def is_batch_matmul(op: Op) -> bool:
  dims = op.attrs.get("dot_dimension_numbers", {})
  return (all(v.type.rank == 3 for v in op.operands) and op.result.type.rank == 3
          and all(dims.get(k, []) == v for k, v in CANONICAL.items()))


def _arrange(value: Value, first: list[int], middle: list[int], last: list[int], like: Op,
             new_ops: list[Op]) -> Value:
  """`value` transposed to first+middle+last and reshaped to 3-D [Π first, Π middle, Π last]."""
  permutation = first + middle + last
  if permutation != list(range(value.type.rank)):
    shape = tuple(value.shape[d] for d in permutation)
    transpose = Op("stablehlo.transpose", [value], [TensorType(shape, value.dtype)],
                   {"permutation": permutation}, loc=like.loc)
    new_ops.append(transpose)
    value = transpose.result
    first, middle, last = (list(range(len(first))),
                           list(range(len(first), len(first) + len(middle))),
                           list(range(len(first) + len(middle), len(permutation))))
  shape3 = tuple(math.prod(value.shape[d] for d in group) for group in (first, middle, last))
  if shape3 != value.shape:
    reshape = Op("stablehlo.reshape", [value], [TensorType(shape3, value.dtype)], loc=like.loc)
    new_ops.append(reshape)
    value = reshape.result
  return value


def _normalize(op: Op, new_ops: list[Op], replaced: dict[Value, Value]) -> None:
  dims = op.attrs["dot_dimension_numbers"]
  lhs, rhs = op.operands
  lb, lc = dims["lhs_batching_dimensions"], dims["lhs_contracting_dimensions"]
  rb, rc = dims["rhs_batching_dimensions"], dims["rhs_contracting_dimensions"]
  lf = [d for d in range(lhs.type.rank) if d not in lb + lc]
  rf = [d for d in range(rhs.type.rank) if d not in rb + rc]
  lhs3 = _arrange(lhs, lb, lf, lc, op, new_ops)
  rhs3 = _arrange(rhs, rb, rc, rf, op, new_ops)
  result_shape = (lhs3.shape[0], lhs3.shape[1], rhs3.shape[2])
  attrs = dict(op.attrs, dot_dimension_numbers=dict(CANONICAL))
  matmul = Op("stablehlo.dot_general", [lhs3, rhs3],
              [TensorType(result_shape, op.result.dtype)], attrs, loc=op.loc)
  new_ops.append(matmul)
  if result_shape == op.result.shape:
    replaced[op.result] = matmul.result
    return
  restore = Op("stablehlo.reshape", [matmul.result], [op.result.type], loc=op.loc)
  restore.results = [op.result]
  new_ops.append(restore)


def run(module: Module) -> None:
  for function in module.functions.values():
    for block in list(control_flow_blocks(function.body)):
      new_ops: list[Op] = []
      replaced: dict[Value, Value] = {}
      for op in block.ops:
        if op.name == "stablehlo.dot_general" and not is_batch_matmul(op):
          _normalize(op, new_ops, replaced)
        else:
          new_ops.append(op)
      block.ops = new_ops
      replace_uses(block, replaced)
