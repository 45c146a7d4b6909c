"""Affine index values inside a row fusion (row_fusion.py): attention's causal mask computed on
chip, block by block, instead of in a separate elementwise pass over the scores.

An iota over the row space and the integer arithmetic and compares on it are affine views of the
row coordinates (affine_index.py). In a block of p rows, row r0 + i on partition i, such a view's
value at (partition i, column j) is base + i · partition_step + j · column_step: the view is one
more place the blocks walk (row_fusion.py gives it an offset and partition stride per block as
it does HBM operands; the offset is the base, stepping with the blocks' counted loop like an HBM
offset). So, as in an elementwise cluster:
- a select between a row tile and a splat on an affine predicate is one GpSimd `affine_select`;
- an affine value needed in a tile (read by another op, or stored) is one GpSimd `iota` (and,
  for a predicate, a compare of it with 0);
- the other affine values are absorbed: no instruction and no tile.
The instructions are the ones the elementwise cluster would emit for the same elements, so the
bits are the same.
"""

from __future__ import annotations

import numpy as np

from hlo_lowering.ir import Op, Value
from hlo_lowering.lowering.affine_index import Affine, affine_select, analyse
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.program import Scalar, TileAP

ABSORBED, IOTA, SELECT = "absorbed", "iota", "select"


def is_row_iota(op: Op, row_shape: tuple[int, ...], reduced: int) -> bool:
  """Whether a row fusion of rows `row_shape` (last `reduced` dims a row) may hold the iota `op`:
  a signed iota over the rows whose values fit its dtype and whose view's columns are one dim (a
  row of one dim, or an iota along a kept dim, constant over each row)."""
  if op.name != "stablehlo.iota" or not op.result.dtype.is_signed_int:
    return False
  dim = op.attrs["iota_dimension"]
  return (tuple(op.result.shape) == tuple(row_shape)
          and row_shape[dim] - 1 <= np.iinfo(op.result.dtype.numpy).max
          and (reduced == 1 or dim < len(row_shape) - reduced))


def plan(ctx: LoweringContext, ops: list[Op], row_shape: tuple[int, ...], canon,
         stored: set[Value]) -> dict[Op, tuple]:
  """The members computed from the rows' coordinates: op -> (ABSORBED,), (IOTA, Affine) or
  (SELECT, Affine, index of the row operand, fill). `ops`: the members in program order;
  `canon`: the row fusion's aliases; `stored`: the values stored outside."""
  rows = [op for op in ops if tuple(op.result.shape) == tuple(row_shape)
          and op.name != "stablehlo.reduce"]
  affine = analyse(ctx, rows, canon)
  selects = {op: found for op in rows
             if (found := affine_select(ctx, op, affine, canon)) is not None}
  plans, tile_readers = {}, set()
  for op in reversed(ops):
    if op in selects:
      predicate, index, fill = selects[op]
      plans[op] = (SELECT, predicate, index, fill)
      tile_readers.add(canon(op.operands[index]))
    elif op.result in affine:
      needed = op.result in stored or op.result in tile_readers
      plans[op] = (IOTA, affine[op.result]) if needed else (ABSORBED,)
    else:
      tile_readers.update(canon(v) for v in op.operands)
  return plans


def emit(ctx: LoweringContext, special: tuple, dst: TileAP, src: TileAP | None, pattern: dict,
         scratch) -> None:
  """One on-chip member of a block on GpSimd. `pattern`: base, partition_step, free_steps and
  steps of its view in this block; `scratch(dtype)`: a row tile for a predicate's difference."""
  b = ctx.builder
  predicate: Affine = special[1]
  if special[0] == SELECT:
    b.affine_select(predicate.compare, dst, src, fill=special[3], debug=ctx.debug_id, **pattern)
  elif predicate.compare is None:
    b.iota(dst, debug=ctx.debug_id, **pattern)
  else:  # the difference, then its compare with 0
    dtype = predicate.view.dtype
    difference = scratch(dtype)
    b.iota(difference, debug=ctx.debug_id, **pattern)
    b.tensor_scalar(predicate.compare, dst, difference, Scalar(dtype, 0), debug=ctx.debug_id)
