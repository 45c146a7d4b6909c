"""Collectives and the core's identity, each one `collective` / `partition_id` instruction on
the POOL stream (docs/multi-device.md). Participants are core ranks: resolve-collective-groups
put them in attrs["core_groups"] / ["core_pairs"]; a variadic collective is one instruction per
operand, in operand order (every core issues them in the same order)."""

from __future__ import annotations

import re

from hlo_lowering.errors import CompileError, UNIMPLEMENTED
from hlo_lowering.ir import Op
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.gpsimd.reduce import REDUCERS
from hlo_lowering.lowering.registry import register_lowering
from hlo_lowering.passes.canonicalize import reducer_of
from hlo_lowering.program import Alu, Scalar
from hlo_lowering.program.enums import (COLLECTIVE_ALL_GATHER, COLLECTIVE_ALL_REDUCE,
                                        COLLECTIVE_ALL_TO_ALL, COLLECTIVE_BROADCAST,
                                        COLLECTIVE_PERMUTE, COLLECTIVE_REDUCE_SCATTER)

_HANDLE = re.compile(r"handle\s*=\s*(\d+)")


def _channel(op: Op) -> int:
  match = _HANDLE.search(str(op.attrs.get("channel_handle", "")))
  return int(match[1]) if match else 0


def _reducer(op: Op) -> Alu:
  reducer = reducer_of(op)
  if reducer not in REDUCERS:
    raise CompileError(f"{op.describe()}: the reduction body must be one add, max, min, mul, and, "
                       "or or xor of its two arguments", UNIMPLEMENTED)
  return REDUCERS[reducer]


def _emit(ctx: LoweringContext, hlo_op: Op, kind: int, **fields) -> None:
  for operand, result in zip(hlo_op.operands, hlo_op.results):
    out = ctx.new_result(result)
    if out.size:
      ctx.builder.collective(kind, out.ap(), ctx.place(operand).ap(), channel=_channel(hlo_op),
                             debug=ctx.debug_id, **fields)


@register_lowering("stablehlo.all_reduce", kind="gpsimd")
def lower_all_reduce(ctx: LoweringContext, op: Op) -> None:
  _emit(ctx, op, COLLECTIVE_ALL_REDUCE, groups=op.attrs["core_groups"], op=_reducer(op))


@register_lowering("stablehlo.all_gather", kind="gpsimd")
def lower_all_gather(ctx: LoweringContext, op: Op) -> None:
  _emit(ctx, op, COLLECTIVE_ALL_GATHER, groups=op.attrs["core_groups"],
        dim=op.attrs["all_gather_dim"])


@register_lowering("stablehlo.reduce_scatter", kind="gpsimd")
def lower_reduce_scatter(ctx: LoweringContext, op: Op) -> None:
  _emit(ctx, op, COLLECTIVE_REDUCE_SCATTER, groups=op.attrs["core_groups"], op=_reducer(op),
        dim=op.attrs["scatter_dimension"])


@register_lowering("stablehlo.all_to_all", kind="gpsimd")
def lower_all_to_all(ctx: LoweringContext, op: Op) -> None:
  _emit(ctx, op, COLLECTIVE_ALL_TO_ALL, groups=op.attrs["core_groups"],
        dim=op.attrs["split_dimension"], concat_dim=op.attrs["concat_dimension"])


@register_lowering("stablehlo.collective_permute", kind="gpsimd")
def lower_collective_permute(ctx: LoweringContext, op: Op) -> None:
  _emit(ctx, op, COLLECTIVE_PERMUTE, pairs=op.attrs["core_pairs"])


@register_lowering("stablehlo.collective_broadcast", kind="gpsimd")
def lower_collective_broadcast(ctx: LoweringContext, op: Op) -> None:
  _emit(ctx, op, COLLECTIVE_BROADCAST, groups=op.attrs["core_groups"])


@register_lowering("stablehlo.partition_id", kind="gpsimd")
@register_lowering("stablehlo.replica_id", kind="gpsimd")
def lower_core_id(ctx: LoweringContext, op: Op) -> None:
  out = ctx.new_result(op.result)
  if op.attrs.get("core_rank"):
    ctx.builder.partition_id(out.ap(), debug=ctx.debug_id)
  else:
    ctx.builder.gp_fill(out.ap(), Scalar(op.result.dtype, 0), debug=ctx.debug_id)
