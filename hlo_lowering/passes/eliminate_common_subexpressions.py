"""eliminate-common-subexpressions: inside a fused region (trn.fusion, trn.row_fusion), an op
that computes exactly what an earlier op of the region computes (same name, operands, attributes
and result types) is dropped, and its uses read the earlier op's results.

Why: a JAX trace spells work the way the user's code and the autodiff rules do, repeats included
(jax.nn.gelu's backward squares x once for x³ and again for 3x²), and XLA merges the repeats
(HloCSE). Inside a fused region each repeat is one more instruction per tile; merged, the tile
loop computes it once. The kept op is the same deterministic computation, so every result keeps
its bits. Only inside a region: there both copies already live in one tile loop, so a merge
never makes a value cross HBM. Merged across regions, a value two fusions each computed on chip
would have to be stored by one and loaded by the other (merging the two broadcasts of
softmax's row sum, one in the forward's fusion and one in its gradient's, stores a
[heads, t, t] fp32 broadcast: 671 MB at seq 2048).

Requires: fuse-elementwise, fuse-rows and fuse-attention have run (the regions are final).
Ensures: no two ops of one fused region compute the same thing by the key above, among ops
without regions and without effects (`_EFFECTS`); a fused op returns each value once (a result
that became another's repeat is dropped, its uses read the other), and its `fused_ops` counts
its region's ops.
Runs after: pair-matmuls (fuse-attention before it); before fold-convert-into-reduce.
"""

from __future__ import annotations

from typing import Hashable

import numpy as np

from hlo_lowering.ir import (Block, Module, Op, Value, control_flow_blocks, replace_uses,
                             walk_ops)
from hlo_lowering.report import FUSED_OPS

# Ops whose result is not a function of their operands and attributes alone, or that must
# run once each: never merged.
_EFFECTS = frozenset({
    "stablehlo.custom_call", "stablehlo.rng", "stablehlo.rng_bit_generator",
    "stablehlo.infeed", "stablehlo.outfeed", "stablehlo.send", "stablehlo.recv",
    "stablehlo.all_gather", "stablehlo.all_reduce", "stablehlo.all_to_all",
    "stablehlo.reduce_scatter", "stablehlo.collective_permute", "stablehlo.collective_broadcast",
    "stablehlo.optimization_barrier", "stablehlo.after_all", "stablehlo.create_token",
})


class _Unkeyed(Exception):
  """An attribute value with no exact key: its op is left alone."""


def _frozen(value) -> Hashable:
  """An exact, hashable form of an attribute value: arrays by dtype, shape and bytes, floats by
  their bits (so −0.0 is not 0.0 and NaN equals itself), containers element by element."""
  if isinstance(value, np.ndarray):
    return ("array", value.dtype.str, value.shape, value.tobytes())
  if isinstance(value, np.generic):
    return ("scalar", value.dtype.str, value.tobytes())
  if isinstance(value, float):
    return ("float", value.hex())
  if isinstance(value, dict):
    return ("dict", tuple(sorted((str(k), _frozen(v)) for k, v in value.items())))
  if isinstance(value, (list, tuple)):
    return (type(value).__name__, tuple(_frozen(v) for v in value))
  if value is None or isinstance(value, (bool, int, str)):
    return (type(value).__name__, value)
  raise _Unkeyed(type(value).__name__)


def computation_key(op: Op) -> Hashable | None:
  """What `op` computes, comparable between ops of one block; None for an op never merged."""
  if op.regions or not op.results or op.name in _EFFECTS or not op.name.startswith("stablehlo."):
    return None
  try:
    attrs = _frozen(op.attrs)
  except _Unkeyed:
    return None
  return (op.name, tuple(op.operands), attrs, tuple(str(r.type) for r in op.results))


def _eliminate(block: Block, merged: dict[Value, Value], in_region: bool) -> None:
  """Merges the repeats among `block`'s ops when `in_region`, recursing into its fused ops;
  `merged` (repeat's value -> the kept one) is applied to each op's operands on the way."""
  first: dict[Hashable, Op] = {}
  kept = []
  for op in block.ops:
    op.operands = [merged.get(v, v) for v in op.operands]
    if op.name in FUSED_OPS:
      region = op.regions[0].block
      _eliminate(region, {}, True)
      _drop_repeated_results(op, merged)
      op.attrs["fused_ops"] = len(region.ops) - 1
    key = computation_key(op) if in_region else None
    earlier = first.get(key) if key is not None else None
    if earlier is None:
      if key is not None:
        first[key] = op
      kept.append(op)
      continue
    merged.update(zip(op.results, earlier.results))
  block.ops = kept


def _drop_repeated_results(op: Op, merged: dict[Value, Value]) -> None:
  """A fused op whose region now returns one value twice keeps the first result of it."""
  ret = op.regions[0].block.terminator
  index: dict[Value, int] = {}
  returned, results = [], []
  for value, result in zip(ret.operands, op.results):
    if value in index:
      merged[result] = results[index[value]]
      continue
    index[value] = len(results)
    returned.append(value)
    results.append(result)
  ret.operands, op.results = returned, results


def run(module: Module) -> None:
  for function in module.functions.values():
    merged: dict[Value, Value] = {}
    for block in control_flow_blocks(function.body):
      _eliminate(block, merged, False)
    replace_uses(function.body, merged)


def repeated(module: Module) -> Op | None:
  """The first op of a fused region that computes what an earlier op of it does, or the first
  fused op returning a value twice (the pass's Ensures)."""
  for function in module.functions.values():
    for op in walk_ops(function.body):
      if op.name not in FUSED_OPS:
        continue
      region = op.regions[0].block
      if len(set(region.terminator.operands)) < len(region.terminator.operands):
        return op
      seen = set()
      for inner in region.ops:
        key = computation_key(inner)
        if key is not None and key in seen:
          return inner
        seen.add(key)
  return None
