"""fold-convert-into-reduce: reduce(convert(x)) → reduce(x) when the convert widens a narrower
float to f32, which is exact, and the reduce is one the reduce lowering runs (add, max or min).

Why: JAX reduces bf16 in fp32 by converting first (`jnp.sum(x.astype(jnp.float32), axis=0)`:
bias and layernorm-scale gradients, statistics over a batch). Outside a row fusion the convert is
an op of its own: it writes the fp32 copy to HBM (4 bytes an element) and the reduce reads it
back. The reduce lowering accumulates float operands in fp32 partials whatever their dtype (the
first tile's DMA converts, VectorE widens the others exactly), so reading x itself gives the
same fp32 values in the same order — the same bits — for a third of the HBM bytes.

Requires: canonicalize (a reduce carries `attrs["reducer"]`); fuse-elementwise and fuse-rows have
run, so the converts they absorbed are theirs and every reduce left is a native one.
Ensures: no single-operand add/max/min reduce at the top level of a function or control-flow
block reads a stablehlo.convert of the same block from a narrower float to f32; such a reduce
reads the convert's operand instead (its init and result stay f32: the IR's one mixed-type
reduce, which only the reduce lowering reads), and a convert left without users is removed.
Runs after: fuse-rows; before check-supported.
"""

from __future__ import annotations

from collections import Counter

from hlo_lowering.ir import Block, Module, Op, control_flow_blocks, walk_ops
from hlo_lowering.lowering.reduce import REDUCERS
from hlo_lowering.program import DType


def _widening_convert(value, producers: dict) -> Op | None:
  """The convert producing `value` from a narrower float, when `value` is f32."""
  op = producers.get(value)
  if op is None or op.name != "stablehlo.convert" or value.dtype != DType.F32:
    return None
  source = op.operands[0].dtype
  return op if source.is_float and source.itemsize < DType.F32.itemsize else None


def folds(op: Op, producers: dict) -> Op | None:
  """The convert a reduce reads that this pass folds, or None."""
  if op.name != "stablehlo.reduce" or len(op.operands) != 2:
    return None
  if op.attrs.get("reducer") not in REDUCERS:
    return None
  return _widening_convert(op.operands[0], producers)


def producers_of(block: Block) -> dict:
  return {result: op for op in block.ops for result in op.results}


def unfolded(module: Module) -> Op | None:
  """A reduce this pass would still fold (the verifier's check), or None."""
  for function in module.functions.values():
    for block in control_flow_blocks(function.body):
      producers = producers_of(block)
      for op in block.ops:
        if folds(op, producers) is not None:
          return op
  return None


def _fold_block(block: Block, uses: Counter) -> None:
  producers = producers_of(block)
  dropped = set()
  for op in block.ops:
    convert = folds(op, producers)
    if convert is None:
      continue
    op.operands[0] = convert.operands[0]
    uses[convert.result] -= 1
    if uses[convert.result] == 0:
      dropped.add(id(convert))
  if dropped:
    block.ops = [op for op in block.ops if id(op) not in dropped]


def run(module: Module) -> None:
  for function in module.functions.values():
    uses = Counter(value for op in walk_ops(function.body) for value in op.operands)
    for block in control_flow_blocks(function.body):
      _fold_block(block, uses)
