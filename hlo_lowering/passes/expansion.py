"""Helpers for passes that expand one op into ops the lowering rules already handle.

`expand_ops(module, expand)` visits every op of every function, also inside while/case/if
regions (not reduce/sort bodies, which lowering matches as a whole; `blocks=every_block`: every
region's), and calls `expand(op, e)`:
it returns None to keep the op, or the values that replace the op's results, after appending the
new ops through the `Emitter` (which gives them the op's location).
"""

from __future__ import annotations

from typing import Callable, Iterator

import numpy as np

from hlo_lowering.ir import (Block, Module, Op, TensorType, Value, control_flow_blocks,
                             replace_uses)
from hlo_lowering.program import DType


class Emitter:
  """Appends new ops, each with the location of the op being expanded."""

  def __init__(self, op: Op, new_ops: list[Op]):
    self.op = op
    self.new_ops = new_ops

  def emit(self, name: str, operands: list[Value], shape, dtype: DType, attrs=None) -> Value:
    new = Op(name, operands, [TensorType(tuple(shape), dtype)], attrs, loc=self.op.loc)
    self.new_ops.append(new)
    return new.result

  def splat(self, value, dtype: DType, shape) -> Value:
    """A constant of `shape` whose every element is `value` (a broadcast scalar, so the
    elementwise rules take it as an immediate)."""
    scalar = self.emit("stablehlo.constant", [], (), dtype,
                       {"value": np.array(value).astype(dtype.numpy)})
    return self.emit("stablehlo.broadcast_in_dim", [scalar], shape, dtype,
                     {"broadcast_dimensions": []})

  def bitcast(self, v: Value, dtype: DType) -> Value:
    return self.emit("stablehlo.bitcast_convert", [v], v.shape, dtype)

  def binary(self, name: str, a: Value, b: Value) -> Value:
    return self.emit(f"stablehlo.{name}", [a, b], a.shape, a.dtype)

  def binary_splat(self, name: str, a: Value, value) -> Value:
    return self.binary(name, a, self.splat(value, a.dtype, a.shape))

  def compare(self, direction: str, a: Value, b: Value, compare_type: str) -> Value:
    return self.emit("stablehlo.compare", [a, b], a.shape, DType.PRED,
                     {"comparison_direction": direction, "compare_type": compare_type})

  def select(self, pred: Value, on_true: Value, on_false: Value) -> Value:
    return self.emit("stablehlo.select", [pred, on_true, on_false], on_true.shape,
                     on_true.dtype)

  def reshape(self, v: Value, shape) -> Value:
    if tuple(shape) == v.shape:
      return v
    return self.emit("stablehlo.reshape", [v], shape, v.dtype)

  def slice(self, v: Value, start, limit) -> Value:
    shape = [hi - lo for lo, hi in zip(start, limit)]
    return self.emit("stablehlo.slice", [v], shape, v.dtype,
                     {"start_indices": list(start), "limit_indices": list(limit),
                      "strides": [1] * len(start)})

  def concatenate(self, parts: list[Value], dim: int) -> Value:
    shape = list(parts[0].shape)
    shape[dim] = sum(p.shape[dim] for p in parts)
    return self.emit("stablehlo.concatenate", parts, shape, parts[0].dtype, {"dimension": dim})

  def transpose(self, v: Value, permutation) -> Value:
    if list(permutation) == list(range(v.type.rank)):
      return v
    return self.emit("stablehlo.transpose", [v], [v.shape[p] for p in permutation], v.dtype,
                     {"permutation": list(permutation)})


def every_block(block: Block) -> Iterator[Block]:
  """`block` and, depth first, the blocks of every region nested in it (shard_map bodies too)."""
  yield block
  for op in block.ops:
    for region in op.regions:
      yield from every_block(region.block)


def expand_ops(module: Module, expand: Callable[[Op, Emitter], list[Value] | None],
               emitter: type[Emitter] = Emitter,
               blocks: Callable[[Block], Iterator[Block]] = control_flow_blocks) -> None:
  """Runs `expand` on every op of the `blocks` of each function (see the module docstring),
  giving it an `emitter`."""
  for function in module.functions.values():
    for block in list(blocks(function.body)):
      new_ops: list[Op] = []
      replaced: dict[Value, Value] = {}
      for op in block.ops:
        values = expand(op, emitter(op, new_ops))
        if values is None:
          new_ops.append(op)
        else:
          replaced.update(zip(op.results, values))
      block.ops = new_ops
      replace_uses(block, replaced)


# Same-width integer types of the float types, for bit manipulation.
SIGNED_OF = {DType.F32: DType.S32, DType.BF16: DType.S16, DType.F16: DType.S16,
             DType.F8E5M2: DType.S8, DType.F8E4M3FN: DType.S8, DType.F64: DType.S64}
UNSIGNED_OF = {DType.F32: DType.U32, DType.BF16: DType.U16, DType.F16: DType.U16,
               DType.F8E5M2: DType.U8, DType.F8E4M3FN: DType.U8, DType.F64: DType.U64}
