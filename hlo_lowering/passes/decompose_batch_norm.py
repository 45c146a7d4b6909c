"""decompose-batch-norm: stablehlo.batch_norm_training / batch_norm_inference / batch_norm_grad
become the reduce, elementwise and broadcast_in_dim ops of their StableHLO specification.

The decomposition is the spec's reference, op for op, in the operand's element type (so a bf16
batch norm rounds after every step, as the spec's ops do): mean = Σ x / N and the biased
variance = Σ (x − mean)² / N over every dim but `feature_index` (N = elements per feature);
inference y = scale · (x − mean) / sqrt(var + ε) + offset; grad as the spec's i1…i6. Per-feature
vectors are broadcast along `feature_index`; ε is a splat constant of the element type.

Requires: calls inlined (inline-calls).
Ensures: no batch_norm_* op is left (also inside while/case/if regions); the reduces carry
`attrs["reducer"] = "add"`; each new op keeps the batch-norm op's location.
Runs after: unroll-static-loops, before canonicalize and fuse-elementwise (so the elementwise
pieces fuse around the reductions).
"""

from __future__ import annotations

import numpy as np

from hlo_lowering.ir import (Block, Module, Op, Region, TensorType, Value, control_flow_blocks,
                             replace_uses)

_NAMES = ("stablehlo.batch_norm_training", "stablehlo.batch_norm_inference",
          "stablehlo.batch_norm_grad")


class _Emitter:
  """Appends ops with the batch-norm op's location; every value has the operand's element type."""

  def __init__(self, op: Op, new_ops: list[Op]):
    self.op = op
    self.new_ops = new_ops
    operand = op.operands[0]
    self.shape = operand.shape
    self.dtype = operand.dtype
    self.feature = int(op.attrs["feature_index"])
    self.reduced = [d for d in range(len(self.shape)) if d != self.feature]

  def emit(self, name: str, operands: list[Value], shape, attrs=None, regions=None) -> Value:
    new = Op(name, operands, [TensorType(tuple(shape), self.dtype)], attrs, regions, self.op.loc)
    self.new_ops.append(new)
    return new.result

  def binary(self, name: str, a: Value, b: Value) -> Value:
    return self.emit(f"stablehlo.{name}", [a, b], a.shape)

  def constant(self, value: float) -> Value:
    """A splat of `value` in the element type, over the operand's shape."""
    scalar = self.emit("stablehlo.constant", [], (),
                       {"value": np.array(value, dtype=self.dtype.numpy)})
    return self.emit("stablehlo.broadcast_in_dim", [scalar], self.shape,
                     {"broadcast_dimensions": []})

  def per_feature(self, vector: Value) -> Value:
    """A [C] vector broadcast along feature_index to the operand's shape."""
    return self.emit("stablehlo.broadcast_in_dim", [vector], self.shape,
                     {"broadcast_dimensions": [self.feature]})

  def feature_sum(self, x: Value) -> Value:
    """Σ x over every dim but feature_index: a [C] vector."""
    scalar = TensorType((), self.dtype)
    a, b = Value(scalar), Value(scalar)
    add = Op("stablehlo.add", [a, b], [scalar], loc=self.op.loc)
    ret = Op("stablehlo.return", [add.result], [], loc=self.op.loc)
    zero = self.emit("stablehlo.constant", [], (), {"value": np.array(0, dtype=self.dtype.numpy)})
    return self.emit("stablehlo.reduce", [x, zero], (self.shape[self.feature],),
                     {"dimensions": list(self.reduced), "reducer": "add"},
                     [Region(Block([a, b], [add, ret]))])

  def elements_per_feature(self) -> float:
    return float(np.prod(self.shape, dtype=np.int64) // max(self.shape[self.feature], 1))

  def feature_mean(self, x: Value) -> Value:
    total = self.feature_sum(x)
    count = self.emit("stablehlo.constant", [], total.shape,
                      {"value": np.full(total.shape, self.elements_per_feature(),
                                        dtype=self.dtype.numpy)})
    return self.binary("divide", total, count)

  def normalize(self, x, scale, offset, mean, variance) -> Value:
    """The spec's batch_norm_inference."""
    epsilon = self.constant(float(self.op.attrs["epsilon"]))
    centered = self.binary("subtract", x, self.per_feature(mean))
    stddev = self.emit("stablehlo.sqrt", [self.binary("add", self.per_feature(variance), epsilon)],
                       self.shape)
    normalized = self.binary("divide", centered, stddev)
    return self.binary("add", self.binary("multiply", self.per_feature(scale), normalized),
                       self.per_feature(offset))


def _training(e: _Emitter) -> list[Value]:
  x, scale, offset = e.op.operands
  mean = e.feature_mean(x)
  centered = e.binary("subtract", x, e.per_feature(mean))
  variance = e.feature_mean(e.binary("multiply", centered, centered))
  return [e.normalize(x, scale, offset, mean, variance), mean, variance]


def _inference(e: _Emitter) -> list[Value]:
  return [e.normalize(*e.op.operands)]


def _grad(e: _Emitter) -> list[Value]:
  x, scale, mean, variance, grad_output = e.op.operands
  epsilon = e.constant(float(e.op.attrs["epsilon"]))
  variance_eps = e.binary("add", e.per_feature(variance), epsilon)
  centered = e.binary("subtract", x, e.per_feature(mean))
  stddev = e.emit("stablehlo.sqrt", [variance_eps], e.shape)
  normalized = e.binary("divide", centered, stddev)
  count = e.constant(e.elements_per_feature())
  i1 = e.binary("multiply", grad_output, count)
  i2 = e.per_feature(e.feature_sum(grad_output))
  i3 = e.per_feature(e.feature_sum(e.binary("multiply", grad_output, centered)))
  i4 = e.binary("multiply", i3, centered)
  i5 = e.binary("divide", i4, variance_eps)
  i6 = e.binary("subtract", e.binary("subtract", i1, i2), i5)
  factor = e.binary("divide", e.binary("divide", e.per_feature(scale), stddev), count)
  grad_operand = e.binary("multiply", factor, i6)
  grad_scale = e.feature_sum(e.binary("multiply", grad_output, normalized))
  grad_offset = e.feature_sum(grad_output)
  return [grad_operand, grad_scale, grad_offset]


_DECOMPOSE = {"stablehlo.batch_norm_training": _training,
              "stablehlo.batch_norm_inference": _inference,
              "stablehlo.batch_norm_grad": _grad}


def run(module: Module) -> None:
  for function in module.functions.values():
    for block in list(control_flow_blocks(function.body)):
      if not any(op.name in _NAMES for op in block.ops):
        continue
      new_ops: list[Op] = []
      replaced: dict[Value, Value] = {}
      for op in block.ops:
        if op.name not in _DECOMPOSE:
          new_ops.append(op)
          continue
        values = _DECOMPOSE[op.name](_Emitter(op, new_ops))
        replaced.update(zip(op.results, values))
      block.ops = new_ops
      replace_uses(block, replaced)
