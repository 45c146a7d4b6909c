"""pair-matmuls: two batch matmuls that read one large operand X, one as X·B1 and one as Xᵀ·B2,
become one trn.matmul_pair, so the lowering reads each tile of X from HBM once for both.

Attention's backward is the case: dQ = dS·K and dK = dSᵀ·Q both read the [heads, t, t] score
gradient dS. Lowered apart, each streams all of dS from HBM (134 MB at seq 2048 with 16 heads)
and is bound by HBM. Paired (lowering/matmul_pair.py), each m-tile of X is loaded once: its rows
are the stationary operand of Xᵀ·B2 as loaded and, transposed on TensorE, of X·B1. Every output
element is the same products summed in the same k order in fp32 as the unpaired matmul's
(docs/numerics.md), so the bits are the unpaired program's.

A pair is formed when all of these hold, otherwise nothing changes:
- both are batch matmuls [B, M, K] x [B, K, N] (normalize-dot-general) that TensorE multiplies
  (`matmul.accepts`), in the same block, with one dtype, bf16 or f32, for X, B1 and B2;
- the second's lhs is `stablehlo.transpose(X)` with permutation [0, 2, 1];
- X holds at least MIN_SHARED_BYTES and its K is a whole number of two or more 128-row tiles
  (measured at LNC=2, bf16: [8, 512, 512] 0.72× the unpaired time, [16, 256, 256] 0.87×,
  [16, 128, 512] 0.72×; one K tile, [64, 128, 128], 1.03×, and 1 MiB or less 1.03×), and B2's
  N fits a PSUM bank;
- the later matmul's operands are all defined before the earlier one, or no op between the
  two reads the earlier one's result: the pair takes the earlier (resp. later) one's place.

Requires: normalize-dot-general ran; fuse-attention ran (a matmul it moved into a row fusion is
not a top-level op any more).
Ensures: each pair is one trn.matmul_pair(X, B1, B2) -> (X·B1, Xᵀ·B2) whose region is
`transpose(x)`, then `dot_general(x, b1)` and `dot_general(transpose, b2)` in the program's order,
and the return of (X·B1, Xᵀ·B2), the region's arguments bound to X, B1, B2; the two matmuls'
results are replaced by the pair's; the transpose outside is dropped when the pair was its only
reader; other ops unchanged.
Runs after: fuse-attention.
"""

from __future__ import annotations

from hlo_lowering.ir import (Block, Module, Op, Region, Value, control_flow_blocks, replace_uses,
                             use_counts, walk_ops)
from hlo_lowering.lowering import matmul
from hlo_lowering.passes.normalize_dot_general import is_batch_matmul
from hlo_lowering.program import DType

PAIR = "trn.matmul_pair"
DOT = "stablehlo.dot_general"
TRANSPOSE = "stablehlo.transpose"
MIN_SHARED_BYTES = 2 * 1024 * 1024
TILE_ROWS = 128
PSUM_BANK_FP32 = 512
_DTYPES = frozenset({DType.BF16, DType.F32})


def _pairable(dot: Op) -> bool:
  return (dot.name == DOT and is_batch_matmul(dot) and matmul.accepts(dot)
          and all(v.dtype == dot.operands[0].dtype for v in dot.operands)
          and dot.operands[0].dtype in _DTYPES)


def _shared_fits(x: Value, b2: Value) -> bool:
  _, _, k = x.shape
  return (x.type.nbytes >= MIN_SHARED_BYTES and k % TILE_ROWS == 0 and k >= 2 * TILE_ROWS
          and 0 < b2.shape[2] <= PSUM_BANK_FP32)


def _reads(op: Op, value: Value) -> bool:
  return any(value in o.operands for o in [op, *(i for r in op.regions for i in walk_ops(r.block))])


def _defined_before(values, block: Block, index: int) -> bool:
  """Whether no op of `block` from `index` on makes any of `values`."""
  later = {r for op in block.ops[index:] for r in op.results}
  return not any(v in later for v in values)


def _pair_op(dot: Op, transposed_dot: Op, transpose: Op, first: Op) -> Op:
  x, b1 = dot.operands
  b2 = transposed_dot.operands[1]
  args = [Value(v.type) for v in (x, b1, b2)]
  inner_t = Op(TRANSPOSE, [args[0]], [transpose.result.type], dict(transpose.attrs),
               loc=transpose.loc)
  inner_dots = [Op(DOT, [args[0], args[1]], [dot.result.type], dict(dot.attrs), loc=dot.loc),
                Op(DOT, [inner_t.result, args[2]], [transposed_dot.result.type],
                   dict(transposed_dot.attrs), loc=transposed_dot.loc)]
  ret = Op("stablehlo.return", [d.result for d in inner_dots], [], loc=dot.loc)
  if first is transposed_dot:  # the region keeps the program's order (lowered apart, its order)
    inner_dots.reverse()
  region = Region(Block(args, [inner_t, *inner_dots, ret]))
  return Op(PAIR, [x, b1, b2], [dot.result.type, transposed_dot.result.type], regions=[region],
            loc=dot.loc)


def pair_formed(pair: Op) -> bool:
  """What the pass ensures of a trn.matmul_pair (verifier): its region is the transpose of X,
  X·B1 and transpose·B2 on its arguments, returning both in that order."""
  x, b1, b2 = pair.regions[0].block.args
  ops = pair.regions[0].block.ops
  if [op.name for op in ops] != [TRANSPOSE, DOT, DOT, "stablehlo.return"]:
    return False
  transpose, dot, transposed_dot, ret = ops
  if dot.operands[0] is not x:
    dot, transposed_dot = transposed_dot, dot
  return (transpose.operands == [x] and dot.operands == [x, b1]
          and transposed_dot.operands == [transpose.result, b2]
          and ret.operands == [dot.result, transposed_dot.result]
          and [r.type for r in pair.results] == [dot.result.type, transposed_dot.result.type])


def _pair_block(block: Block, uses: dict[Value, int]) -> None:
  transposes = {op.result: op for op in block.ops
                if op.name == TRANSPOSE and op.attrs.get("permutation") == [0, 2, 1]}
  dots = [op for op in block.ops if _pairable(op)]
  paired: set[Op] = set()
  for dot in dots:
    x = dot.operands[0]
    for other in dots:
      transpose = transposes.get(other.operands[0])
      if (dot in paired or other in paired or other is dot or transpose is None
              or transpose.operands[0] is not x or not _shared_fits(x, other.operands[1])):
        continue
      i, j = block.ops.index(dot), block.ops.index(other)
      first, second = (dot, other) if i < j else (other, dot)
      lo, hi = min(i, j), max(i, j)
      if _defined_before(second.operands, block, lo):
        at = lo
      elif not any(_reads(op, first.result) for op in block.ops[lo + 1:hi]):
        at = hi
      else:
        continue
      pair = _pair_op(dot, other, transpose, first)
      block.ops[at] = pair
      block.ops.remove(second if at == lo else first)
      if uses.get(transpose.result, 0) == 1:
        block.ops.remove(transpose)
      replace_uses(block, {dot.result: pair.results[0], other.result: pair.results[1]})
      paired.update((dot, other))


def run(module: Module) -> None:
  for function in module.functions.values():
    uses = use_counts(function.body)
    for block in list(control_flow_blocks(function.body)):
      _pair_block(block, uses)
