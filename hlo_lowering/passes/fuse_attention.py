"""fuse-attention: move a batch matmul whose whole result is one row operand of a trn.row_fusion
into that row fusion, so its rows are computed on chip per block and never cross HBM.

Attention's scores q·kᵀ (and the backward's dP = dO·Vᵀ) are a [B, M, N] batch matmul with a
short contraction (the head dim) read only by the softmax's (the softmax vjp's) row fusion,
whose rows are the matmul's (b, m) and whose columns are its n. Lowered apart, the matmul
stores the [B, M, N] result and the row fusion loads it back. Moved inside, the row fusion's
lowering (lowering/attention_rows.py) computes each block's rows on TensorE into PSUM and
evicts them into the block's row tile in the result dtype, as the matmul's own eviction rounds
them, so the fused program's bits are the unfused one's (every output element is the same
products summed in k order in fp32, whatever the tiling: docs/numerics.md).

A matmul is moved when all of these hold, otherwise nothing changes:
- it is in batch-matmul form [B, M, K] x [B, K, N] -> [B, M, N] (normalize-dot-general), its
  operands share a dtype, bf16 or f32, and TensorE multiplies them (`matmul.accepts`);
- K ≤ 128 (one contraction tile: one matmul per output block), N ≤ MAX_COLUMNS (a block's
  fp32 rows fit four PSUM banks) and a result of at least MIN_RESULT_BYTES;
- the row fusion holds no other matmul (a block's PSUM banks are its one matmul's);
- its result has exactly one use, an operand of a trn.row_fusion in the same block (directly or
  through reshapes, each read once, that move with it), whose row
  space has one reduced dim of N columns and kept dims that are B's dims then M (unit dims
  anywhere);
- inside the row fusion that operand is read only as the rows: it has the row shape, or it is
  read (through nested trn.fusion operands) only by reshapes or broadcast_in_dims to the row
  shape that keep the element order.

Requires: fuse-rows ran (trn.row_fusion ops exist); normalize-dot-general ran.
Ensures: each moved matmul (and its reshapes) are the first ops of its row fusion's region, the
matmul reading two new block arguments bound to its former operands; the row fusion's operand
is replaced by those two;
other ops unchanged.
Runs after: fuse-rows.
"""

from __future__ import annotations

import math

from hlo_lowering.ir import Block, Module, Op, Value, control_flow_blocks, use_counts
from hlo_lowering.lowering import matmul
from hlo_lowering.passes.normalize_dot_general import is_batch_matmul
from hlo_lowering.program import DType

ROW_FUSION = "trn.row_fusion"
FUSION = "trn.fusion"
DOT = "stablehlo.dot_general"
MAX_CONTRACTION = 128
MAX_COLUMNS = 2048
# Smaller results stay apart: their HBM round trip is shorter than the fused blocks' per-batch
# operand loads and transposes (the golden corpus' 8×16 to 16×32 matmuls ran 1-3 % slower fused).
MIN_RESULT_BYTES = 64 * 1024
_DTYPES = frozenset({DType.BF16, DType.F32})
_VIEWS = frozenset({"stablehlo.broadcast_in_dim", "stablehlo.reshape"})


def _matmul_matches(dot: Op) -> bool:
  if not (is_batch_matmul(dot) and matmul.accepts(dot)):
    return False
  lhs, rhs = dot.operands
  return (lhs.dtype == rhs.dtype and lhs.dtype in _DTYPES and dot.result.dtype.is_float
          and 0 < lhs.shape[2] <= MAX_CONTRACTION and 0 < dot.result.shape[2] <= MAX_COLUMNS
          and dot.result.type.nbytes >= MIN_RESULT_BYTES)


def _rows_match(dot: Op, fusion: Op) -> bool:
  row_shape = tuple(fusion.attrs["row_shape"])
  b, m, n = dot.result.shape
  if int(fusion.attrs["reduced_dims"]) != 1 or row_shape[-1] != n:
    return False
  kept = [d for d in row_shape[:-1] if d != 1]
  if m == 1:
    return math.prod(kept) == b
  return bool(kept) and kept[-1] == m and math.prod(kept[:-1]) == b


def _order_keeping_view(op: Op, row_shape: tuple[int, ...]) -> bool:
  if op.result.shape != row_shape:
    return False
  if op.name == "stablehlo.reshape":
    return True
  dims = list(op.attrs["broadcast_dimensions"])
  return dims == sorted(dims) and math.prod(op.operands[0].shape) == math.prod(row_shape)


def _read_as_rows(arg: Value, block: Block, row_shape: tuple[int, ...]) -> bool:
  """Whether every use of `arg` in `block` (and nested trn.fusion bodies) is an order-keeping
  view of it as the rows (a value of the row shape is read as the rows by any use)."""
  if arg.shape == row_shape:
    return True
  for op in block.ops:
    for i, v in enumerate(op.operands):
      if v is not arg:
        continue
      if op.name == FUSION:
        inner = op.regions[0].block
        if not _read_as_rows(inner.args[i], inner, row_shape):
          return False
      elif not (op.name in _VIEWS and _order_keeping_view(op, row_shape)):
        return False
  return True


def _move_into(chain: list[Op], fusion: Op, index: int) -> None:
  """Moves `chain` (the matmul, then the reshapes from its result to the operand) into the
  region as its first ops, the matmul reading new block arguments bound to its operands."""
  dot = chain[0]
  region = fusion.regions[0].block
  old_arg = region.args[index]
  new_args = [Value(v.type) for v in dot.operands]
  inner = [Op(DOT, new_args, [dot.result.type], dict(dot.attrs), loc=dot.loc)]
  for reshape in chain[1:]:
    inner.append(Op(reshape.name, [inner[-1].result], [reshape.result.type],
                    dict(reshape.attrs), loc=reshape.loc))
  fusion.operands = fusion.operands[:index] + fusion.operands[index + 1:] + list(dot.operands)
  region.args = region.args[:index] + region.args[index + 1:] + new_args
  for op in region.ops:
    op.operands = [inner[-1].result if v is old_arg else v for v in op.operands]
  region.ops[:0] = inner


def matmul_placed(fusion: Op) -> bool:
  """What the pass ensures of a row fusion (verifier): no matmul, or one, its region's first op,
  reading block arguments."""
  region = fusion.regions[0].block
  dots = [op for op in region.ops if op.name == DOT]
  return not dots or (dots == [region.ops[0]]
                      and all(any(v is a for a in region.args) for v in dots[0].operands))


def _holds_matmul(fusion: Op) -> bool:
  """One matmul per row fusion: its PSUM banks are the block's (attention_rows.py)."""
  return any(op.name == DOT for op in fusion.regions[0].block.ops)


def _producing_chain(v: Value, producer: dict[Value, Op], uses: dict[Value, int]) -> list[Op]:
  """The matmul and the reshapes (each result read once) that make `v`, or []."""
  chain = []
  while uses.get(v, 0) == 1 and v in producer:
    op = producer[v]
    chain.insert(0, op)
    if op.name == DOT:
      return chain
    v = op.operands[0]
  return []


def _fuse_block(block: Block, uses: dict[Value, int]) -> None:
  producer = {op.result: op for op in block.ops if op.name in (DOT, "stablehlo.reshape")}
  moved = set()
  for fusion in block.ops:
    if fusion.name != ROW_FUSION:
      continue
    row_shape = tuple(fusion.attrs["row_shape"])
    index = 0
    while index < len(fusion.operands) and not _holds_matmul(fusion):
      chain = _producing_chain(fusion.operands[index], producer, uses)
      region = fusion.regions[0].block
      if (chain and _matmul_matches(chain[0]) and _rows_match(chain[0], fusion)
          and _read_as_rows(region.args[index], region, row_shape)):
        _move_into(chain, fusion, index)
        moved.update(chain)
        continue  # the next operand now sits at `index`
      index += 1
  if moved:
    block.ops = [op for op in block.ops if op not in moved]


def run(module: Module) -> None:
  for function in module.functions.values():
    uses = use_counts(function.body)
    for block in list(control_flow_blocks(function.body)):
      _fuse_block(block, uses)
