"""fold-product-into-reduce: add-reduce(multiply(a, b)) → trn.product_reduce(a, b, init), so the
reduce multiplies each tile it loads instead of reading a product that crossed HBM.

Why: a layernorm's scale gradient is `jnp.sum(g * xhat, axis=0)`: outside a row fusion the
multiply is an op of its own, which writes the [rows, features] product to HBM and the reduce
reads it back (the transformer block's two at seq 2048: 4.2 MB each way, about 20 µs each on
the step's critical path). The reduce lowering (lowering/reduce.py) loads both factors of a
tile, multiplies them on VectorE into the product's dtype (rounding once, as the multiply's own
tile does) and reduces that tile as it reduced the loaded product: the same values in the same
order, the same bits.

Requires: canonicalize (a reduce carries `attrs["reducer"]`); fuse-elementwise and fuse-rows have
run (a multiply they absorbed is theirs); fold-convert-into-reduce has run.
Ensures: no single-operand add-reduce at the top level of a function or control-flow block reads
a float stablehlo.multiply of the same block that nothing else reads, or a trn.fusion of only
such a multiply and its widening convert to f32; each such pair is one
trn.product_reduce(a, b, init) with the reduce's attributes, body and result (a bf16 product is
rounded as the multiply rounded it, then reduced in the reduce's dtype: the widening is exact), in
the reduce's place, and the multiply (the fusion) is removed.
Runs after: fold-convert-into-reduce; before check-supported.
"""

from __future__ import annotations

from hlo_lowering.ir import Block, Module, Op, control_flow_blocks, use_counts
from hlo_lowering.passes.fold_convert_into_reduce import producers_of
from hlo_lowering.program import DType

PRODUCT_REDUCE = "trn.product_reduce"


def _factors(product: Op) -> list | None:
  """(a, b) when `product` is a float multiply of two operands of its type, or a trn.fusion of
  just that multiply and, optionally, its widening convert to f32 (`jnp.sum(g * x)` of bf16:
  JAX upcasts before summing, and fuse-elementwise joins the two); else None."""
  if product.name == "stablehlo.multiply":
    a, b = product.operands
    return [a, b] if a.type == b.type == product.result.type and a.dtype.is_float else None
  if product.name != "trn.fusion" or len(product.results) != 1:
    return None
  block = product.regions[0].block
  ops = block.ops[:-1]
  if not ops or ops[0].name != "stablehlo.multiply" or _factors(ops[0]) is None:
    return None
  widens = lambda op: (op.name == "stablehlo.convert" and op.operands == [ops[0].result]
                        and op.result.dtype == DType.F32
                        and ops[0].result.dtype.itemsize < DType.F32.itemsize)
  if len(ops) > 2 or len(ops) == 2 and not widens(ops[1]):
    return None
  bound = dict(zip(block.args, product.operands))
  if block.terminator.operands != [ops[-1].result] or not all(v in bound for v in ops[0].operands):
    return None
  return [bound[v] for v in ops[0].operands]


def _product(op: Op, producers: dict, uses: dict) -> list | None:
  """The factors of the product an add-reduce reads, when this pass folds it, or None."""
  if op.name != "stablehlo.reduce" or len(op.operands) != 2 or op.attrs.get("reducer") != "add":
    return None
  product = producers.get(op.operands[0])
  if product is None or uses.get(product.results[0], 0) != 1:
    return None
  return _factors(product)


def unfolded(module: Module) -> Op | None:
  """A reduce this pass would still fold (the verifier's check), or None."""
  for function in module.functions.values():
    uses = use_counts(function.body)
    for block in control_flow_blocks(function.body):
      producers = producers_of(block)
      for op in block.ops:
        if _product(op, producers, uses) is not None:
          return op
  return None


def _fold_block(block: Block, uses: dict) -> None:
  producers = producers_of(block)
  folded, out = set(), []
  for op in block.ops:
    factors = _product(op, producers, uses)
    if factors is None:
      out.append(op)
      continue
    fused = Op(PRODUCT_REDUCE, [*factors, op.operands[1]], [], dict(op.attrs), op.regions, op.loc)
    fused.results = op.results
    folded.add(id(producers[op.operands[0]]))
    out.append(fused)
  block.ops = [op for op in out if id(op) not in folded]


def run(module: Module) -> None:
  for function in module.functions.values():
    uses = use_counts(function.body)
    for block in control_flow_blocks(function.body):
      _fold_block(block, uses)
