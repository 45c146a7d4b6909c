"""gather, scatter, dynamic_slice and dynamic_update_slice as gp_gather / gp_scatter.

Every form is first brought to the canonical one the instructions take (docs/program-format.md):
an index table [N, rank(operand)] of start coordinates, one row per window, built with gp_copy
(the index columns JAX gives), gp_iota (operand batching dims) and gp_fill (dims not indexed), and
windows [N, S0..Sr-1] with one (possibly size-1) extent per operand dim. The gathered rows are then
viewed (reshape + transpose) as the StableHLO result, and scatter updates are viewed as rows.
Clamping (gather, dynamic_*) and skipping (scatter) of out-of-range starts happen at run time.
A scatter of one operand whose update computation is replace or a matched combiner is one
gp_scatter; any other (several operands, any update body) is one gp_region_scatter, its body a
region program (gpsimd/region_program.py) applied to each update row in order.
"""

from __future__ import annotations

import math

from hlo_lowering.errors import CompileError, UNIMPLEMENTED
from hlo_lowering.ir import Op, Value
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.gpsimd.region_program import compile_region
from hlo_lowering.lowering.places import Place, row_major_strides
from hlo_lowering.lowering.registry import register_lowering
from hlo_lowering.passes.canonicalize import reducer_of
from hlo_lowering.program import Alu, DType, HbmAP, Scalar
from hlo_lowering.program.enums import SCATTER_CLAMP, SCATTER_SKIP_OUT_OF_BOUNDS

# Windows [N, S0..Sr-1] must fit the 8 dims of an access pattern.
MAX_OPERAND_RANK = 7
_COMBINERS = {"add": Alu.ADD, "max": Alu.MAX, "min": Alu.MIN, "mul": Alu.MUL}
# On bools (0 or 1) or is max and and is min (torch_xla's bool scatter_add body is an or).
_PRED_COMBINERS = {"or": Alu.MAX, "max": Alu.MAX, "and": Alu.MIN, "min": Alu.MIN}


def _check_rank(op: Op, rank: int) -> None:
  if not 1 <= rank <= MAX_OPERAND_RANK:
    where = op.loc.position or "an unknown source line"
    raise CompileError(f"{op.name} of a rank-{rank} operand is not supported on NeuronCores "
                       f"(ranks 1..{MAX_OPERAND_RANK}) at {where}", UNIMPLEMENTED)


def _table(ctx: LoweringContext, index_dtype: DType, rows: int, rank: int) -> int:
  """A temporary [rows, rank] index table: s64 for signed indices, u64 for unsigned ones, so
  every index value keeps its meaning."""
  dtype = DType.S64 if index_dtype.is_signed_int else DType.U64
  return ctx.builder.tensor("temporary", dtype, (rows, rank), name=f"t{len(ctx.builder.tensors)}")


def _index_table(ctx: LoweringContext, indices: Value, index_vector_dim: int, index_map, batching,
                 rank: int) -> tuple[HbmAP, list[int]]:
  """The [N, rank] start table of a gather/scatter and the batch shape N unrolls.

  Column index_map[k] holds indices[..., k, ...] (k along index_vector_dim); for each
  (operand dim, indices dim) in `batching` the column holds the position along that indices dim;
  other columns are 0."""
  shape = list(indices.shape)
  batch_dims = [d for d in range(len(shape)) if d != index_vector_dim]
  batch_shape = [shape[d] for d in batch_dims]
  rows = math.prod(batch_shape)
  table = _table(ctx, indices.dtype, rows, rank)
  dtype = ctx.builder.tensors[table].dtype
  column_strides = tuple(s * rank for s in row_major_strides(batch_shape))

  def column(d: int) -> HbmAP:
    return Place(table, d, tuple(batch_shape), column_strides, dtype).ap()

  b, debug = ctx.builder, ctx.debug_id
  if len(set(index_map) | {d for d, _ in batching}) < rank:
    b.gp_fill(HbmAP.dense(table, (rows, rank)), Scalar(dtype, 0), debug=debug)
  source = ctx.place(indices)
  for k, d in enumerate(index_map):
    piece = source
    if index_vector_dim < len(shape):
      starts = [k if i == index_vector_dim else 0 for i in range(len(shape))]
      counts = [1 if i == index_vector_dim else n for i, n in enumerate(shape)]
      piece = source.sliced(starts, counts, [1] * len(shape)).permuted(batch_dims +
                                                                       [index_vector_dim])
      piece = Place(piece.tensor, piece.offset, piece.shape[:-1], piece.strides[:-1], piece.dtype)
    b.gp_copy(column(d), piece.ap(), debug=debug)
  for d, indices_dim in batching:
    b.gp_iota(column(d), batch_dims.index(indices_dim), debug=debug)
  return HbmAP.dense(table, (rows, rank)), batch_shape


def _start_table(ctx: LoweringContext, starts: list[Value]) -> HbmAP:
  """The [1, rank] table of dynamic_slice / dynamic_update_slice start scalars."""
  table = _table(ctx, starts[0].dtype, 1, len(starts))
  for d, start in enumerate(starts):
    ctx.builder.gp_copy(HbmAP(table, d, ((1, 1),)), ctx.place(start).ap(), debug=ctx.debug_id)
  return HbmAP.dense(table, (1, len(starts)))


@register_lowering("stablehlo.gather", kind="gpsimd")
def lower_gather(ctx: LoweringContext, op: Op) -> None:
  operand, indices = op.operands
  dn = op.attrs["dimension_numbers"]
  sizes = tuple(op.attrs["slice_sizes"])
  out = ctx.new_result(op.result)
  if not out.size:
    return
  rank = operand.type.rank
  _check_rank(op, rank)
  table, batch_shape = _index_table(
      ctx, indices, dn["index_vector_dim"], dn["start_index_map"],
      list(zip(dn["operand_batching_dims"], dn["start_indices_batching_dims"])), rank)
  rows_shape = (math.prod(batch_shape),) + sizes
  dropped = set(dn["collapsed_slice_dims"]) | set(dn["operand_batching_dims"])
  window = [sizes[d] for d in range(rank) if d not in dropped]
  # Result dim j is window dim offset_dims.index(j) or the next batch dim, in order.
  offset_dims = list(dn["offset_dims"])
  perm, next_batch = [], 0
  for j in range(op.result.type.rank):
    if j in offset_dims:
      perm.append(len(batch_shape) + offset_dims.index(j))
    else:
      perm.append(next_batch)
      next_batch += 1
  src = ctx.place(operand).ap()
  if perm == sorted(perm):
    # The rows in order are the result's elements in order: gather straight into it.
    ctx.builder.gp_gather(HbmAP.dense(out.tensor, rows_shape, out.offset), src, table,
                          debug=ctx.debug_id)
    return
  rows = ctx.builder.tensor("temporary", operand.dtype, rows_shape,
                            name=f"t{len(ctx.builder.tensors)}")
  ctx.builder.gp_gather(HbmAP.dense(rows, rows_shape), src, table, debug=ctx.debug_id)
  view = Place.dense(rows, batch_shape + window, operand.dtype).permuted(perm)
  ctx.builder.gp_copy(out.ap(), view.ap(), debug=ctx.debug_id)


def _scatter_combiner(op: Op) -> Alu | None:
  """copy for one operand whose body returns its update argument, else the body's binary op if
  gp_scatter has it; None for a body only a region program runs."""
  if len(op.operands) != 3:
    return None
  block = op.regions[0].block if len(op.regions) == 1 else None
  if block is not None and len(block.args) == 2 and len(block.ops) == 1 and \
      list(block.ops[0].operands) == [block.args[1]]:
    return Alu.COPY
  reducer = reducer_of(op) or ""
  pred = op.operands[0].dtype == DType.PRED
  return _PRED_COMBINERS.get(reducer) if pred else _COMBINERS.get(reducer)


def _update_rows(ctx: LoweringContext, updates: Value, scatter_dims, window_dims, rows: int,
                 window: tuple) -> HbmAP:
  """updates viewed as the [rows, S0..Sr-1] windows the instructions take (dense first if the
  permutation does not keep them contiguous)."""
  place = ctx.place(updates).permuted(scatter_dims + window_dims)
  if not place.is_dense:
    dense = Place.dense(ctx.builder.tensor("temporary", updates.dtype, place.shape,
                                           name=f"t{len(ctx.builder.tensors)}"),
                        place.shape, updates.dtype)
    ctx.builder.gp_copy(dense.ap(), place.ap(), debug=ctx.debug_id)
    place = dense
  return HbmAP.dense(place.tensor, (rows,) + window, place.offset)


@register_lowering("stablehlo.scatter", kind="gpsimd")
def lower_scatter(ctx: LoweringContext, op: Op) -> None:
  n = len(op.results)
  operands, indices, updates = op.operands[:n], op.operands[n], op.operands[n + 1:]
  combiner = _scatter_combiner(op)
  region = compile_region(op, outer_splat=ctx.splat) if combiner is None else None
  dn = op.attrs["scatter_dimension_numbers"]
  outs = [ctx.new_result(result) for result in op.results]
  if not outs[0].size:
    return
  for out, operand in zip(outs, operands):
    ctx.builder.gp_copy(out.ap(), ctx.place(operand).ap(), debug=ctx.debug_id)
  if not updates[0].type.size:
    return
  rank = operands[0].type.rank
  _check_rank(op, rank)
  table, batch_shape = _index_table(
      ctx, indices, dn["index_vector_dim"], dn["scattered_dims_to_operand_dims"],
      list(zip(dn["input_batching_dims"], dn["scatter_indices_batching_dims"])), rank)
  window_dims = list(dn["update_window_dims"])
  dropped = set(dn["inserted_window_dims"]) | set(dn["input_batching_dims"])
  kept = [d for d in range(rank) if d not in dropped]
  window = tuple(updates[0].shape[window_dims[kept.index(d)]] if d in kept else 1
                 for d in range(rank))
  scatter_dims = [d for d in range(updates[0].type.rank) if d not in window_dims]
  rows = [_update_rows(ctx, u, scatter_dims, window_dims, math.prod(batch_shape), window)
          for u in updates]
  if region is None:
    ctx.builder.gp_scatter(combiner, outs[0].ap(), rows[0], table, SCATTER_SKIP_OUT_OF_BOUNDS,
                           debug=ctx.debug_id)
  else:
    ctx.builder.gp_region_scatter([out.ap() for out in outs], rows, table, region.words,
                                  debug=ctx.debug_id)


@register_lowering("stablehlo.dynamic_slice", kind="gpsimd")
def lower_dynamic_slice(ctx: LoweringContext, op: Op) -> None:
  operand, *starts = op.operands
  out = ctx.new_result(op.result)
  if not out.size:
    return
  if not starts:
    ctx.builder.gp_copy(out.ap(), ctx.place(operand).ap(), debug=ctx.debug_id)
    return
  _check_rank(op, len(starts))
  ctx.builder.gp_gather(HbmAP.dense(out.tensor, (1,) + out.shape, out.offset),
                        ctx.place(operand).ap(), _start_table(ctx, starts), debug=ctx.debug_id)


@register_lowering("stablehlo.dynamic_update_slice", kind="gpsimd")
def lower_dynamic_update_slice(ctx: LoweringContext, op: Op) -> None:
  operand, update, *starts = op.operands
  out = ctx.new_result(op.result)
  if not out.size:
    return
  if not starts:
    ctx.builder.gp_copy(out.ap(), ctx.place(update).ap(), debug=ctx.debug_id)
    return
  ctx.builder.gp_copy(out.ap(), ctx.place(operand).ap(), debug=ctx.debug_id)
  if not update.type.size:
    return
  _check_rank(op, len(starts))
  source = ctx.place(update)
  rows = HbmAP(source.tensor, source.offset, ((0, 1),) + tuple(zip(source.strides, source.shape)))
  ctx.builder.gp_scatter(Alu.COPY, out.ap(), rows, _start_table(ctx, starts), SCATTER_CLAMP,
                         debug=ctx.debug_id)
