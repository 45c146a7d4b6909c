"""stablehlo.reduce with one operand and a recognised reducer, as one gp_reduce; the
two-operand (values, indices) reduce of argmax/argmin (JAX's or torch_xla's body, constant
inits) as one gp_arg_reduce; any other reduce (any number of operands, any body) as one
gp_region_reduce, its body compiled to a region program (gpsimd/region_program.py) and folded in
XLA's CPU order. That order is a sequential fold from the init over the reduced elements in
row-major order, except that XLA:CPU's tree-reduction-rewriter first splits a one-result reduce
with a reduced dim longer than 32: while one is, a reduce_window with windows of min(d, 32)
(stride the same, SAME padding) over every reduced dim folds each window from the init; the
reduce then folds what is left. The rule emits the same gp_region_reduce_windows, so a
non-associative body gives the CPU backend's bits.

The canonicalize pass names the reducer (`attrs["reducer"]`: add, max, min, mul, and, or, xor).
The operand is viewed with its reduced dims moved last, as gp_reduce wants. A compile-time init
value becomes the instruction's immediate; a runtime one is combined afterwards.
"""

from __future__ import annotations

import numpy as np

from hlo_lowering.ir import Op
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.gpsimd.comparators import arg_reduce_kind, select_arg_reduce_kind
from hlo_lowering.lowering.gpsimd.region_program import compile_region
from hlo_lowering.lowering.places import Place
from hlo_lowering.lowering.registry import register_lowering
from hlo_lowering.program import Alu, DType, Scalar
from hlo_lowering.program.enums import ARG_REDUCE_SELECT

# XLA:CPU's TreeReductionRewriter window: reduced dims longer than this are split first.
TREE_REDUCTION_WINDOW = 32

REDUCERS = {"add": Alu.ADD, "max": Alu.MAX, "min": Alu.MIN, "mul": Alu.MUL, "and": Alu.AND,
            "or": Alu.OR, "xor": Alu.XOR}


def identity(reducer: str, dtype: DType):
  """The value x with reducer(x, y) == y for every y of `dtype`."""
  if reducer in ("add", "or", "xor"):
    return 0
  if reducer == "mul":
    return 1
  if reducer == "and":
    return 1 if dtype == DType.PRED else (-1 if dtype.is_signed_int else
                                          int(np.iinfo(dtype.numpy).max))
  if dtype.is_float:
    return float("-inf") if reducer == "max" else float("inf")
  if dtype == DType.PRED:
    return 0 if reducer == "max" else 1
  info = np.iinfo(dtype.numpy)
  return int(info.min) if reducer == "max" else int(info.max)


def _accepts(op: Op) -> bool:
  return len(op.operands) == 2 and op.attrs.get("reducer") in REDUCERS


@register_lowering("stablehlo.reduce", kind="gpsimd", when=_accepts,
                   describe="one input, body add, max, min, mul, and, or or xor")
def lower_reduce(ctx: LoweringContext, op: Op) -> None:
  operand, init = op.operands
  reducer = op.attrs["reducer"]
  dims = list(op.attrs["dimensions"])
  out = ctx.new_result(op.result)
  if not out.size:
    return
  init_place = ctx.place(init).broadcast(op.result.shape, [])
  if not operand.type.size:
    ctx.builder.gp_copy(out.ap(), init_place.ap(), debug=ctx.debug_id)
    return
  kept = [d for d in range(operand.type.rank) if d not in dims]
  source = ctx.place(operand).permuted(kept + dims)
  init_scalar = ctx.splat_scalar(init)
  immediate = init_scalar or Scalar(operand.dtype, identity(reducer, operand.dtype))
  ctx.builder.gp_reduce(REDUCERS[reducer], out.ap(), source.ap(), len(dims), immediate,
                        debug=ctx.debug_id)
  if init_scalar is None:
    ctx.builder.gp_elementwise(REDUCERS[reducer], out.ap(), [out.ap(), init_place.ap()],
                               debug=ctx.debug_id)


def _arg_reduce_body(op: Op):
  """(kind, body) of JAX's argmax/argmin body or torch_xla's select body, else None."""
  if len(op.operands) != 4:
    return None
  kind = arg_reduce_kind(op)
  if kind is not None:
    return kind, 0
  kind = select_arg_reduce_kind(op)
  return None if kind is None else (kind, ARG_REDUCE_SELECT)


def _constant_arg_inits(ctx: LoweringContext, op: Op) -> bool:
  """Whether op is an argmax/argmin reduce with compile-time initial values."""
  return _arg_reduce_body(op) is not None and None not in (ctx.splat_scalar(op.operands[2]),
                                                           ctx.splat_scalar(op.operands[3]))


@register_lowering("stablehlo.reduce", kind="gpsimd", when_placed=_constant_arg_inits,
                   describe="values and indices with JAX's argmax/argmin body or torch_xla's "
                            "select body, constant inits")
def lower_variadic_reduce(ctx: LoweringContext, op: Op) -> None:
  """reduce((values, indices), (init_value, init_index)) with JAX's argmax/argmin body, or with
  XLA's select body that torch_xla emits (gp_arg_reduce's select form)."""
  kind, body = _arg_reduce_body(op)
  values, indices, init_value, init_index = op.operands
  inits = ctx.splat_scalar(init_value), ctx.splat_scalar(init_index)
  dims = list(op.attrs["dimensions"])
  out_value, out_index = (ctx.new_result(result) for result in op.results)
  if not out_value.size:
    return
  if not values.type.size:
    for out, init in zip((out_value, out_index), (init_value, init_index)):
      ctx.builder.gp_copy(out.ap(), ctx.place(init).broadcast(out.shape, []).ap(),
                          debug=ctx.debug_id)
    return
  kept = [d for d in range(values.type.rank) if d not in dims]
  ctx.builder.gp_arg_reduce(Alu.MAX if kind == "max" else Alu.MIN, out_value.ap(),
                            out_index.ap(), ctx.place(values).permuted(kept + dims).ap(),
                            ctx.place(indices).permuted(kept + dims).ap(), len(dims), *inits,
                            body=body, debug=ctx.debug_id)


@register_lowering("stablehlo.reduce", kind="gpsimd",
                   describe="any number of inputs, any body of elementwise ops (a region program)")
def lower_region_reduce(ctx: LoweringContext, op: Op) -> None:
  n = len(op.results)
  inputs, inits = op.operands[:n], op.operands[n:]
  region = compile_region(op, outer_splat=ctx.splat)
  outs = [ctx.new_result(result) for result in op.results]
  if not outs[0].size:
    return
  init_places = [ctx.place(init).broadcast(out.shape, []) for init, out in zip(inits, outs)]
  if not inputs[0].type.size:
    for out, init in zip(outs, init_places):
      ctx.builder.gp_copy(out.ap(), init.ap(), debug=ctx.debug_id)
    return
  dims = sorted(op.attrs["dimensions"])
  sources = [ctx.place(v) for v in inputs]
  if n == 1:
    sources = [_tree_reduction_windows(ctx, sources[0], inits[0], dims, region.words)]
  kept = [d for d in range(inputs[0].type.rank) if d not in dims]
  ctx.builder.gp_region_reduce([out.ap() for out in outs],
                               [source.permuted(kept + dims).ap() for source in sources],
                               [init.ap() for init in init_places], len(dims), region.words,
                               debug=ctx.debug_id)


def _tree_reduction_windows(ctx: LoweringContext, source: Place, init, dims: list[int],
                            region) -> Place:
  """XLA:CPU's tree-reduction-rewriter, applied until no reduced dim is longer than
  TREE_REDUCTION_WINDOW: each round one gp_region_reduce_window folds windows of min(d, 32)
  along every reduced dim (stride the window, SAME padding) into a temporary."""
  while any(source.shape[d] > TREE_REDUCTION_WINDOW for d in dims):
    window, shape = [], []
    for d, size in enumerate(source.shape):
      w = min(size, TREE_REDUCTION_WINDOW) if d in dims else 1
      count = -(-size // w)
      padding = max((count - 1) * w + w - size, 0)
      window.append((w, w, 1, 1, padding // 2, padding - padding // 2))
      shape.append(count)
    tensor = ctx.builder.tensor("temporary", source.dtype, tuple(shape),
                                name=f"t{len(ctx.builder.tensors)}")
    partial = Place.dense(tensor, shape, source.dtype)
    ctx.builder.gp_region_reduce_window([partial.ap()], [source.ap()],
                                        [ctx.place(init).broadcast(tuple(shape), []).ap()],
                                        window, region, debug=ctx.debug_id)
    source = partial
  return source
