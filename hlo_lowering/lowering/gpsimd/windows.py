"""stablehlo.reduce_window as one gp_reduce_window, and stablehlo.select_and_scatter as one
gp_select_and_scatter (docs/program-format.md); other bodies as region programs.

reduce_window covers max/avg pooling (jax.lax.reduce_window, flax's pools) and the cumulative
reductions (jnp.cumsum/cumprod/cummax/cummin lower to a reduce_window whose window spans the axis
with padding on one side). One operand with one of the reducers canonicalize names (add, max,
min, mul, and, or, xor) is one gp_reduce_window; any other (several operands, as in JAX's jvp
of max pooling, or any body) is one gp_region_reduce_window, its body a region program
(gpsimd/region_program.py) folded in the same order from the inits. select_and_scatter is the
gradient of max/min pooling: a select region that is one compare of the two arguments
(GE/GT/LE/LT, not TOTALORDER on floats) and a scatter region that is a reducer (add, max, min,
mul) make one gp_select_and_scatter; any other regions run as region programs
(lower_region_select_and_scatter). A compile-time init is the instruction's immediate; a
runtime one is combined afterwards (exact for max/min, a different rounding order for float
add/mul).
"""

from __future__ import annotations

import numpy as np

from hlo_lowering.errors import INVALID_ARGUMENT, CompileError
from hlo_lowering.ir import Op
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.gpsimd.comparators import unrecognised_region
from hlo_lowering.lowering.gpsimd.reduce import REDUCERS, identity
from hlo_lowering.lowering.gpsimd.region_program import compile_region, compile_select_fold
from hlo_lowering.lowering.places import Place
from hlo_lowering.lowering.registry import register_lowering
from hlo_lowering.passes.canonicalize import _REDUCER_BODIES
from hlo_lowering.program import Alu, DType, HbmAP, Scalar

_SELECTORS = {"GE": Alu.GE, "GT": Alu.GT, "LE": Alu.LE, "LT": Alu.LT}
_SWAPPED = {"GE": "LE", "GT": "LT", "LE": "GE", "LT": "GT"}
_SCATTER_COMBINERS = ("add", "max", "min", "mul")


def _malformed(op: Op, name: str, value: np.ndarray, expected: list[int]) -> CompileError:
  where = op.loc.position or "an unknown source line"
  return CompileError(f"{op.name}: attribute {name} has shape {list(value.shape)}, expected "
                      f"{expected} for a rank-{expected[0]} operand, at {where}", INVALID_ARGUMENT)


def _attr(op: Op, name: str, rank: int, default: int) -> list[int]:
  value = op.attrs.get(name)
  if value is None:
    return [default] * rank
  value = np.asarray(value)
  if value.shape != (rank,):
    raise _malformed(op, name, value, [rank])
  return [int(v) for v in value]


def _window(op: Op, rank: int) -> list[tuple]:
  """(size, stride, base_dilation, window_dilation, pad_low, pad_high) per dim."""
  sizes = _attr(op, "window_dimensions", rank, 1)
  strides = _attr(op, "window_strides", rank, 1)
  base = _attr(op, "base_dilations", rank, 1)
  dilations = _attr(op, "window_dilations", rank, 1)
  padding = op.attrs.get("padding")
  pads = np.zeros((rank, 2), np.int64) if padding is None else np.asarray(padding, np.int64)
  if pads.shape != (rank, 2):
    raise _malformed(op, "padding", pads, [rank, 2])
  if (pads < 0).any():
    raise unrecognised_region(op, "negative window padding")
  return [(sizes[d], strides[d], base[d], dilations[d], int(pads[d, 0]), int(pads[d, 1]))
          for d in range(rank)]


def _region_reducer(region) -> str | None:
  """The reducer of a region `return binop(arg0, arg1)`, as canonicalize names them."""
  block = region.block
  if len(block.args) != 2 or len(block.ops) != 2:
    return None
  combine, ret = block.ops
  if ret.operands != combine.results or set(combine.operands) != set(block.args):
    return None
  return _REDUCER_BODIES.get(combine.name)


def _selector(region) -> Alu | None:
  """The selector of a select region `return compare(arg0, arg1)`; swapped arguments flip it."""
  block = region.block
  if len(block.args) != 2 or len(block.ops) != 2:
    return None
  compare, ret = block.ops
  if compare.name != "stablehlo.compare" or ret.operands != compare.results:
    return None
  direction = compare.attrs.get("comparison_direction")
  if direction not in _SELECTORS or compare.attrs.get("compare_type") == "TOTALORDER":
    return None
  if list(compare.operands) == list(block.args):
    return _SELECTORS[direction]
  if list(compare.operands) == list(block.args)[::-1]:
    return _SELECTORS[_SWAPPED[direction]]
  return None


def _combine_runtime_init(ctx: LoweringContext, op: Alu, out, init) -> None:
  init_place = ctx.place(init).broadcast(out.shape, [])
  ctx.builder.gp_elementwise(op, out.ap(), [out.ap(), init_place.ap()], debug=ctx.debug_id)


@register_lowering("stablehlo.reduce_window", kind="gpsimd",
                   when=lambda op: len(op.operands) == 2 and op.attrs.get("reducer") in REDUCERS,
                   describe="one input, body add, max, min, mul, and, or or xor")
def lower_reduce_window(ctx: LoweringContext, op: Op) -> None:
  operand, init = op.operands
  reducer = op.attrs["reducer"]
  rank = operand.type.rank
  window = _window(op, rank)
  out = ctx.new_result(op.result)
  if not out.size:
    return
  if not operand.type.size:  # every window lies in the padding: init everywhere
    ctx.builder.gp_copy(out.ap(), ctx.place(init).broadcast(out.shape, []).ap(),
                        debug=ctx.debug_id)
    return
  if rank == 0:
    window = [(1, 1, 1, 1, 0, 0)]
  init_scalar = ctx.splat_scalar(init)
  immediate = init_scalar or Scalar(operand.dtype, identity(reducer, operand.dtype))
  ctx.builder.gp_reduce_window(REDUCERS[reducer], out.ap(), ctx.place(operand).ap(), immediate,
                               window, debug=ctx.debug_id)
  if init_scalar is None:
    _combine_runtime_init(ctx, REDUCERS[reducer], out, init)


@register_lowering("stablehlo.reduce_window", kind="gpsimd",
                   describe="any number of inputs, any body of elementwise ops (a region program)")
def lower_region_reduce_window(ctx: LoweringContext, op: Op) -> None:
  n = len(op.results)
  inputs, inits = op.operands[:n], op.operands[n:]
  rank = inputs[0].type.rank
  window = _window(op, rank)
  region = compile_region(op, outer_splat=ctx.splat)
  outs = [ctx.new_result(result) for result in op.results]
  if not outs[0].size:
    return
  init_places = [ctx.place(init).broadcast(out.shape, []) for init, out in zip(inits, outs)]
  if not inputs[0].type.size:  # every window lies in the padding: init everywhere
    for out, init in zip(outs, init_places):
      ctx.builder.gp_copy(out.ap(), init.ap(), debug=ctx.debug_id)
    return
  if rank == 0:
    window = [(1, 1, 1, 1, 0, 0)]
  ctx.builder.gp_region_reduce_window([out.ap() for out in outs],
                                      [ctx.place(v).ap() for v in inputs],
                                      [init.ap() for init in init_places], window, region.words,
                                      debug=ctx.debug_id)


def _matched_select_and_scatter(op: Op) -> bool:
  return len(op.regions) == 2 and _selector(op.regions[0]) is not None and \
      _region_reducer(op.regions[1]) in _SCATTER_COMBINERS


@register_lowering("stablehlo.select_and_scatter", kind="gpsimd",
                   when=_matched_select_and_scatter,
                   describe="select a GE/GT/LE/LT compare, scatter add, max, min or mul")
def lower_select_and_scatter(ctx: LoweringContext, op: Op) -> None:
  operand, source, init = op.operands
  select = _selector(op.regions[0])
  combiner = _region_reducer(op.regions[1])
  rank = operand.type.rank
  window = _window(op, rank)
  out = ctx.new_result(op.result)
  if not out.size:
    return
  init_scalar = ctx.splat_scalar(init)
  immediate = init_scalar or Scalar(out.dtype, identity(combiner, out.dtype))
  if not source.type.size:
    ctx.builder.gp_fill(out.ap(), immediate, debug=ctx.debug_id)
  else:
    if rank == 0:
      window = [(1, 1, 1, 1, 0, 0)]
    ctx.builder.gp_select_and_scatter(select, REDUCERS[combiner], out.ap(),
                                      ctx.place(operand).ap(), ctx.place(source).ap(),
                                      immediate, window, debug=ctx.debug_id)
  if init_scalar is None:
    _combine_runtime_init(ctx, REDUCERS[combiner], out, init)


def _temporary(ctx: LoweringContext, dtype: DType, shape) -> HbmAP:
  shape = tuple(shape)
  return HbmAP.dense(ctx.builder.tensor("temporary", dtype, shape,
                                        name=f"t{len(ctx.builder.tensors)}"), shape)


def _filled(ctx: LoweringContext, value: Scalar, shape) -> HbmAP:
  """`value` broadcast to `shape` (one element, stride 0)."""
  one = _temporary(ctx, value.dtype, (1,))
  ctx.builder.gp_fill(one, value, debug=ctx.debug_id)
  return HbmAP(one.tensor, 0, tuple((0, n) for n in shape) or ((0, 1),))


@register_lowering("stablehlo.select_and_scatter", kind="gpsimd",
                   describe="any select and scatter regions (region programs)")
def lower_region_select_and_scatter(ctx: LoweringContext, op: Op) -> None:
  """The selection is a gp_region_reduce_window over (operand, flat position) whose region
  folds the select region (compile_select_fold: the first valid position, then the candidate
  whenever select(picked, candidate) is false); the scatter is a gp_region_scatter of each
  source element, in row-major order, onto its pick with the scatter region (a window wholly in
  the padding picks -1, out of bounds: it scatters nothing)."""
  operand, source, init = op.operands
  rank = operand.type.rank
  window = _window(op, rank) if rank else [(1, 1, 1, 1, 0, 0)]
  select = compile_select_fold(op, DType.S32 if operand.type.size < 2**31 else DType.S64,
                               ctx.splat)
  index_dtype = DType(select.words[4])
  scatter = compile_region(op, region_index=1, outer_splat=ctx.splat)
  out = ctx.new_result(op.result)
  if not out.size:
    return
  ctx.builder.gp_copy(out.ap(), ctx.place(init).broadcast(out.shape, []).ap(),
                      debug=ctx.debug_id)
  if not source.type.size:
    return
  shape, picked = tuple(operand.shape) or (1,), tuple(source.shape) or (1,)
  positions = _temporary(ctx, index_dtype, (operand.type.size,))
  ctx.builder.gp_iota(positions, 0, debug=ctx.debug_id)
  pick_value, pick_index = _temporary(ctx, operand.dtype, picked), _temporary(ctx, index_dtype,
                                                                               picked)
  ctx.builder.gp_region_reduce_window(
      [pick_value, pick_index], [ctx.place(operand).ap(), HbmAP.dense(positions.tensor, shape)],
      [_filled(ctx, Scalar(operand.dtype, 0.0 if operand.dtype.is_float else 0), picked), _filled(ctx, Scalar(index_dtype, -1),
                                                              picked)],
      window, select.words, debug=ctx.debug_id)
  updates = ctx.place(source)
  if not updates.is_dense:
    dense = Place.dense(_temporary(ctx, source.dtype, updates.shape).tensor, updates.shape,
                        source.dtype)
    ctx.builder.gp_copy(dense.ap(), updates.ap(), debug=ctx.debug_id)
    updates = dense
  count = source.type.size
  ctx.builder.gp_region_scatter([HbmAP.dense(out.tensor, (out.size,), out.offset)],
                                [HbmAP.dense(updates.tensor, (count, 1), updates.offset)],
                                HbmAP.dense(pick_index.tensor, (count, 1)), scatter.words,
                                debug=ctx.debug_id)
