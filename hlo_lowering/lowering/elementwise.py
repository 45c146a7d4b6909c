"""Native tiled lowerings of elementwise ops: DMA in, VectorE or ScalarE, DMA out.

Each op maps to one ALU op. Transcendentals run on ScalarE (`activation`), everything else on
VectorE (`tensor_unary` / `tensor_tensor` / `tensor_scalar` / `tensor_ternary`). A binary op with
one operand that is a compile-time splat uses `tensor_scalar` with an immediate instead of
loading a tile. Broadcast operands arrive as stride-0 views, so no broadcast is materialised.
Convert is a single DMA, which converts between any two dtypes with the ALU's rules.
"""

from __future__ import annotations

from hlo_lowering.ir import Op
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.registry import register_lowering
from hlo_lowering.lowering.tiling import tiles
from hlo_lowering.program import Alu, DType, Memory, Scalar, TileAP

UNARY = {
    "stablehlo.abs": Alu.ABS, "stablehlo.negate": Alu.NEG, "stablehlo.exponential": Alu.EXP,
    "stablehlo.exponential_minus_one": Alu.EXPM1, "stablehlo.log": Alu.LOG,
    "stablehlo.log_plus_one": Alu.LOG1P, "stablehlo.tanh": Alu.TANH,
    "stablehlo.logistic": Alu.LOGISTIC, "stablehlo.sqrt": Alu.SQRT, "stablehlo.rsqrt": Alu.RSQRT,
    "stablehlo.cbrt": Alu.CBRT, "stablehlo.sine": Alu.SIN, "stablehlo.cosine": Alu.COS,
    "stablehlo.tan": Alu.TAN, "stablehlo.floor": Alu.FLOOR, "stablehlo.ceil": Alu.CEIL,
    "stablehlo.round_nearest_even": Alu.ROUND_NEAREST_EVEN,
    "stablehlo.round_nearest_afz": Alu.ROUND_NEAREST_AFZ, "stablehlo.sign": Alu.SIGN,
    "stablehlo.not": Alu.NOT, "stablehlo.popcnt": Alu.POPCNT,
    "stablehlo.count_leading_zeros": Alu.CLZ, "stablehlo.is_finite": Alu.IS_FINITE,
}
BINARY = {
    "stablehlo.add": Alu.ADD, "stablehlo.subtract": Alu.SUB, "stablehlo.multiply": Alu.MUL,
    "stablehlo.divide": Alu.DIV, "stablehlo.remainder": Alu.REM, "stablehlo.maximum": Alu.MAX,
    "stablehlo.minimum": Alu.MIN, "stablehlo.power": Alu.POW, "stablehlo.atan2": Alu.ATAN2,
    "stablehlo.and": Alu.AND, "stablehlo.or": Alu.OR, "stablehlo.xor": Alu.XOR,
    "stablehlo.shift_left": Alu.SHIFT_LEFT,
    "stablehlo.shift_right_logical": Alu.SHIFT_RIGHT_LOGICAL,
    "stablehlo.shift_right_arithmetic": Alu.SHIFT_RIGHT_ARITHMETIC,
}
TERNARY = {"stablehlo.select": Alu.SELECT, "stablehlo.clamp": Alu.CLAMP}
COMPARE = {"EQ": Alu.EQ, "NE": Alu.NE, "LT": Alu.LT, "LE": Alu.LE, "GT": Alu.GT, "GE": Alu.GE}

# Evaluated by ScalarE's lookup tables: func(x * scale + bias) in fp32.
SCALAR_ENGINE = frozenset({Alu.EXP, Alu.EXPM1, Alu.LOG, Alu.LOG1P, Alu.TANH, Alu.LOGISTIC,
                           Alu.SQRT, Alu.RSQRT, Alu.CBRT, Alu.SIN, Alu.COS, Alu.TAN, Alu.ERF})


def _alu(op: Op) -> Alu:
  if op.name == "stablehlo.compare":
    return COMPARE[op.attrs["comparison_direction"]]
  return {**UNARY, **BINARY, **TERNARY}[op.name]


def _data_dtype(op: Op) -> DType:
  """The dtype that picks the compute domain (select and clamp: the data, not the predicate)."""
  return op.operands[1].dtype if op.name in TERNARY else op.operands[0].dtype


def _alu_accepts(op: Op) -> bool:
  if op.name == "stablehlo.compare" and op.attrs.get("compare_type") == "TOTALORDER":
    return False  # total order (-NaN < -Inf ... NaN) is not an ALU compare
  alu = _alu(op)
  floating = _data_dtype(op).is_float
  return not ((floating and alu.is_integer_only) or (not floating and alu.is_float_only))


def _splat_operand(ctx: LoweringContext, op: Op) -> int | None:
  """Index of the operand of a binary op to pass as an immediate, if one is a splat."""
  if len(op.operands) != 2:
    return None
  for index in (1, 0):
    if ctx.splat(op.operands[index]) is not None and ctx.splat(op.operands[1 - index]) is None:
      return index
  return None


def _sbuf_tile(ctx: LoweringContext, dtype: DType, partitions: int, free: int) -> TileAP:
  return TileAP.dense(Memory.SBUF, dtype, 0, partitions, ctx.sbuf.take(), (free,))


def _compute(ctx: LoweringContext, alu: Alu, dst: TileAP, srcs: list[TileAP],
             immediate: Scalar | None, reverse: bool) -> None:
  b, debug = ctx.builder, ctx.debug_id
  if immediate is not None:
    b.tensor_scalar(alu, dst, srcs[0], immediate, reverse=reverse, debug=debug)
  elif alu.arity == 1 and alu in SCALAR_ENGINE:
    b.activation(alu, dst, srcs[0], debug=debug)
  elif alu.arity == 1:
    b.tensor_unary(alu, dst, srcs[0], debug=debug)
  elif alu.arity == 2:
    b.tensor_tensor(alu, dst, srcs[0], srcs[1], debug=debug)
  else:
    b.tensor_ternary(alu, dst, srcs[0], srcs[1], srcs[2], debug=debug)


def lower_elementwise(ctx: LoweringContext, op: Op) -> None:
  alu = _alu(op)
  out = ctx.new_result(op.result)
  immediate_index = _splat_operand(ctx, op)
  tiled = [v for i, v in enumerate(op.operands) if i != immediate_index]
  immediate = None
  if immediate_index is not None:
    immediate = ctx.splat_scalar(op.operands[immediate_index])
  # Operands of a lower rank (clamp's 0-d bounds) broadcast over the result.
  places = [ctx.place(v) if v.shape == out.shape else ctx.place(v).broadcast(out.shape, [])
            for v in tiled]
  views = [out] + places
  widest = max(p.dtype.itemsize for p in views)
  for tile in tiles(views, ctx.sbuf.slot_bytes // widest):
    srcs = []
    for k, place in enumerate(places, start=1):
      src = _sbuf_tile(ctx, place.dtype, tile.partitions, tile.free)
      ctx.dma(src, tile.hbm_ap(k, place.tensor))
      srcs.append(src)
    dst = _sbuf_tile(ctx, out.dtype, tile.partitions, tile.free)
    _compute(ctx, alu, dst, srcs, immediate, reverse=immediate_index == 0)
    ctx.dma(tile.hbm_ap(0, out.tensor), dst)


def lower_convert(ctx: LoweringContext, op: Op) -> None:
  """One DMA: the DMA engines convert dtypes with the same rules as the ALU."""
  out = ctx.new_result(op.result)
  source = ctx.place(op.operands[0])
  if out.size:
    ctx.dma(out.collapsed_ap(), source.ap())


for _name in (*UNARY, *BINARY, *TERNARY, "stablehlo.compare"):
  register_lowering(_name, kind="native", when=_alu_accepts)(lower_elementwise)
register_lowering("stablehlo.convert", kind="native")(lower_convert)
