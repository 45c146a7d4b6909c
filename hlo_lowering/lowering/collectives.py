"""Collectives and the core's identity, each one `collective` / `partition_id` instruction on
the POOL stream (docs/multi-device.md). Participants are core ranks: resolve-collective-groups
put them in attrs["core_groups"] / ["core_pairs"]; a variadic collective is one instruction per
operand, in operand order (every core issues them in the same order)."""

from __future__ import annotations

import re

from hlo_lowering.errors import CompileError, UNIMPLEMENTED
from hlo_lowering.ir import Op, TensorType, Value
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.places import Place
from hlo_lowering.lowering.gpsimd.reduce import REDUCERS
from hlo_lowering.lowering.registry import register_lowering
from hlo_lowering.passes.canonicalize import reducer_of
from hlo_lowering.program import Alu, Scalar
from hlo_lowering.program.enums import (COLLECTIVE_ALL_GATHER, COLLECTIVE_ALL_REDUCE,
                                        COLLECTIVE_ALL_TO_ALL, COLLECTIVE_BROADCAST,
                                        COLLECTIVE_PERMUTE, COLLECTIVE_REDUCE_SCATTER,
                                        COLLECTIVE_RING)

_HANDLE = re.compile(r"handle\s*=\s*(\d+)")
_BETWEEN_CORES = "one collective instruction between the cores of the execution (docs/multi-device.md)"
_CORE_ID = "partition_id instruction (the core's rank) where it varies between cores, else 0"


def _channel(op: Op) -> int:
  match = _HANDLE.search(str(op.attrs.get("channel_handle", "")))
  return int(match[1]) if match else 0


def _reducer(op: Op) -> Alu:
  reducer = reducer_of(op)
  if reducer not in REDUCERS:
    raise CompileError(f"{op.describe()}: the reduction body must be one add, max, min, mul, and, "
                       "or or xor of its two arguments", UNIMPLEMENTED)
  return REDUCERS[reducer]


def _algorithm(op: Op) -> int:
  """The algorithm choose-collective-algorithm recorded (the ring where it chose none)."""
  return op.attrs.get("collective_algorithm", COLLECTIVE_RING)


def _emit(ctx: LoweringContext, hlo_op: Op, kind: int, **fields) -> None:
  for operand, result in zip(hlo_op.operands, hlo_op.results):
    out = ctx.new_result(result)
    if out.size:
      ctx.builder.collective(kind, out.ap(), ctx.place(operand).ap(), channel=_channel(hlo_op),
                             algorithm=_algorithm(hlo_op), debug=ctx.debug_id, **fields)


@register_lowering("stablehlo.all_reduce", kind="gpsimd", describe=_BETWEEN_CORES)
def lower_all_reduce(ctx: LoweringContext, op: Op) -> None:
  """Operands of one dtype are packed into one buffer and reduced by one collective (the
  bucket combine-all-reduces forms pays one latency, not one per operand); each result is a
  view of the reduced buffer."""
  reducer = _reducer(op)
  by_dtype: dict = {}
  for operand, result in zip(op.operands, op.results):
    if result.type.size:
      by_dtype.setdefault(result.dtype, []).append((operand, result))
  for dtype, pairs in by_dtype.items():
    if len(pairs) == 1:
      (operand, result), = pairs
      out = ctx.new_result(result)
      ctx.builder.collective(COLLECTIVE_ALL_REDUCE, out.ap(), ctx.place(operand).ap(),
                             groups=op.attrs["core_groups"], op=reducer, channel=_channel(op),
                             algorithm=_algorithm(op), debug=ctx.debug_id)
      continue
    total = sum(result.type.size for _, result in pairs)
    packed = ctx.new_temporary(Value(TensorType((total,), dtype)))
    reduced = ctx.new_temporary(Value(TensorType((total,), dtype)))
    offset = 0
    for operand, result in pairs:
      piece = Place.dense(packed.tensor, result.shape, dtype, packed.offset + offset)
      ctx.builder.gp_copy(piece.ap(), ctx.place(operand).ap(), debug=ctx.debug_id)
      ctx.set_place(result, Place.dense(reduced.tensor, result.shape, dtype, reduced.offset + offset))
      offset += result.type.size
    ctx.builder.collective(COLLECTIVE_ALL_REDUCE, reduced.ap(), packed.ap(),
                           groups=op.attrs["core_groups"], op=reducer, channel=_channel(op),
                           algorithm=_algorithm(op), debug=ctx.debug_id)


@register_lowering("stablehlo.all_gather", kind="gpsimd", describe=_BETWEEN_CORES)
def lower_all_gather(ctx: LoweringContext, op: Op) -> None:
  _emit(ctx, op, COLLECTIVE_ALL_GATHER, groups=op.attrs["core_groups"],
        dim=op.attrs["all_gather_dim"])


@register_lowering("stablehlo.reduce_scatter", kind="gpsimd", describe=_BETWEEN_CORES)
def lower_reduce_scatter(ctx: LoweringContext, op: Op) -> None:
  _emit(ctx, op, COLLECTIVE_REDUCE_SCATTER, groups=op.attrs["core_groups"], op=_reducer(op),
        dim=op.attrs["scatter_dimension"])


@register_lowering("stablehlo.all_to_all", kind="gpsimd", describe=_BETWEEN_CORES)
def lower_all_to_all(ctx: LoweringContext, op: Op) -> None:
  _emit(ctx, op, COLLECTIVE_ALL_TO_ALL, groups=op.attrs["core_groups"],
        dim=op.attrs["split_dimension"], concat_dim=op.attrs["concat_dimension"])


@register_lowering("stablehlo.collective_permute", kind="gpsimd", describe=_BETWEEN_CORES)
def lower_collective_permute(ctx: LoweringContext, op: Op) -> None:
  _emit(ctx, op, COLLECTIVE_PERMUTE, pairs=op.attrs["core_pairs"])


@register_lowering("stablehlo.collective_broadcast", kind="gpsimd", describe=_BETWEEN_CORES)
def lower_collective_broadcast(ctx: LoweringContext, op: Op) -> None:
  _emit(ctx, op, COLLECTIVE_BROADCAST, groups=op.attrs["core_groups"])


@register_lowering("stablehlo.partition_id", kind="gpsimd", describe=_CORE_ID)
@register_lowering("stablehlo.replica_id", kind="gpsimd", describe=_CORE_ID)
def lower_core_id(ctx: LoweringContext, op: Op) -> None:
  out = ctx.new_result(op.result)
  if op.attrs.get("core_rank"):
    ctx.builder.partition_id(out.ap(), debug=ctx.debug_id)
  else:
    ctx.builder.gp_fill(out.ap(), Scalar(op.result.dtype, 0), debug=ctx.debug_id)
