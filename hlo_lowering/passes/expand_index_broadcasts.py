"""expand-index-broadcasts: a broadcast of an iota-derived value becomes that value computed at
the broadcast's shape, so the fusion reading it computes it on chip from its own tiles'
coordinates (lowering/affine_index.py) instead of reading a materialised mask through HBM.

`jnp.where(jnp.tril(jnp.ones((t, t), bool)), scores, fill)` reaches the compiler as
select(broadcast_in_dim(select(ge(add(iota0, k), iota1), true, false)), scores, fill): the
[t, t] mask is an index expression (iotas and splat constants combined by elementwise ops), and
its broadcast over [b, heads, t, t] is rewritten into the same ops over [b, heads, t, t], each
iota along the dim the broadcast maps its dim to, one copy per reader (a forward select and its
gradient's select then each compute the mask in their own cluster). The values are the same integers compared the
same way, so results are unchanged.

Requires: canonicalized (splat constants folded, dead ops gone).
Ensures: no broadcast_in_dim reads an index expression; expression ops nothing reads any more
are removed; every other op is unchanged.
Runs after: simplify-unit-reduce; before fuse-elementwise (which then puts the expression into
the consumer's cluster).
"""

from __future__ import annotations

from hlo_lowering.ir import (Block, Module, Op, TensorType, Value, control_flow_blocks,
                             use_counts, walk_ops)
from hlo_lowering.lowering.elementwise import is_fusible
from hlo_lowering.passes.fuse_elementwise import is_splat_constant

_BROADCAST = "stablehlo.broadcast_in_dim"


class _Expressions:
  """The block's index expressions (depending on an iota) and constants (splats and their
  broadcasts), by value, with their producers."""

  def __init__(self, block: Block):
    self.producer: dict[Value, Op] = {}
    self.index: set[Value] = set()
    self.constant: set[Value] = set()
    for op in block.ops:
      if len(op.results) != 1 or op.regions:
        continue
      r = op.result
      self.producer[r] = op
      leaves = [v in self.index or v in self.constant for v in op.operands]
      if op.name == "stablehlo.iota" and is_fusible(op):
        self.index.add(r)
      elif is_splat_constant(op) or (op.name == _BROADCAST and op.operands[0] in self.constant):
        self.constant.add(r)
      elif op.name == _BROADCAST and op.operands[0] in self.index:
        self.index.add(r)
      elif (is_fusible(op) and op.operands and all(leaves)
            and any(v in self.index for v in op.operands)
            and all(v.shape == r.shape for v in op.operands)):
        self.index.add(r)


def _expand(exprs: _Expressions, v: Value, dims: tuple[int, ...], shape: tuple[int, ...],
            new_ops: list[Op], memo: dict) -> Value:
  """`v` recomputed over `shape`, its dim d along `dims[d]` (a broadcast's mapping)."""
  key = (v, dims, shape)
  if key in memo:
    return memo[key]
  op = exprs.producer[v]
  result_type = [TensorType(shape, v.dtype)]
  if v in exprs.constant:
    new = Op(_BROADCAST, [v], result_type, {"broadcast_dimensions": list(dims)}, loc=op.loc)
  elif op.name == "stablehlo.iota":
    new = Op(op.name, [], result_type, {"iota_dimension": dims[op.attrs["iota_dimension"]]},
             loc=op.loc)
  elif op.name == _BROADCAST:
    inner = tuple(dims[d] for d in op.attrs["broadcast_dimensions"])
    memo[key] = _expand(exprs, op.operands[0], inner, shape, new_ops, memo)
    return memo[key]
  else:
    operands = [_expand(exprs, u, dims, shape, new_ops, memo) for u in op.operands]
    new = Op(op.name, operands, result_type, dict(op.attrs), loc=op.loc)
  new_ops.append(new)
  # An index op rewritten here may be expanded again for a broadcast of its own result.
  exprs.producer[new.result] = new
  (exprs.constant if v in exprs.constant else exprs.index).add(new.result)
  memo[key] = new.result
  return new.result


def _expand_block(block: Block) -> None:
  exprs = _Expressions(block)
  readers: dict[Value, list[Op]] = {}
  for op in walk_ops(block):
    for v in op.operands:
      readers.setdefault(v, []).append(op)
  own = set(block.ops)
  # Only where elementwise ops of this block read it: they fuse with the expression (a reduce
  # or a dot would get it materialised at the large shape).
  expandable = {op.result: op for op in block.ops
                if op.name == _BROADCAST and op.operands[0] in exprs.index
                and all(is_fusible(r) and r in own for r in readers.get(op.result, []))}
  if not expandable:
    return
  ops = []
  for op in block.ops:
    # Each reader gets its own copy, just before it: readers in different clusters then each
    # compute the values on chip (one shared copy would be stored for the other cluster).
    memo = {}
    for k, v in enumerate(op.operands):
      if v in expandable:
        broadcast = expandable[v]
        dims = tuple(broadcast.attrs["broadcast_dimensions"])
        op.operands[k] = _expand(exprs, broadcast.operands[0], dims, v.shape, ops, memo)
    ops.append(op)
  block.ops = ops
  replaced = set(expandable.values())
  _remove_unused(block, lambda op: op in replaced or (len(op.results) == 1
                                                      and op.result in exprs.index))


def _remove_unused(block: Block, removable) -> None:
  while True:
    counts = use_counts(block)
    kept = [op for op in block.ops
            if not removable(op) or any(counts.get(r, 0) for r in op.results)]
    if len(kept) == len(block.ops):
      return
    block.ops = kept


def run(module: Module) -> None:
  for function in module.functions.values():
    for block in list(control_flow_blocks(function.body)):
      _expand_block(block)
