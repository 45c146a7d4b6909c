"""The static cost of a program as XLA's HloCostAnalysis counts it: what
`jax.jit(f).lower(...).compile().cost_analysis()` and PJRT_Executable_GetCostAnalysis report.

    program_cost(module) -> {"flops": ..., "transcendentals": ..., "bytes accessed": ...}

The figures describe the program as the user wrote it (the imported StableHLO, before any trn pass),
counted by XLA's published rules, so they equal what JAX's CPU backend reports for
`jax.jit(f).lower(...).cost_analysis()` and what MFU calculators built on it expect:
- an elementwise op costs one flop per result element, or one transcendental for exp, log,
  logistic, power, sqrt, cbrt, rsqrt, tanh, sine, cosine, expm1, log1p and atan2;
- dot_general costs 2 flops per multiply-add; a convolution 2 per multiply-add of the window
  positions that fall inside the (dilated, padded) input;
- reduce and reduce_window apply their body once per combined pair; sort n·⌈log2 n⌉;
- bytes accessed is each op's operand and result bytes, except: parameters, constants and
  get_tuple_element move none; slice, dynamic_slice and gather move what they produce twice (plus
  the gather's indices or the dynamic_slice's first index); dynamic_update_slice its update twice
  (plus its first index); scatter its updates three times (plus its indices); a custom call's cost
  is unknown: it adds -1 flops and -1 bytes, as in XLA;
- XLA counts the HLO that JAX's StableHLO converts to, so the count follows that conversion: a
  convert, broadcast or reshape to the same type is dropped, and so are x+0, x-0 and x·1;
  elementwise ops of constants are folded and equal broadcasts of one constant merged; what then
  no longer reaches a result is dead and costs nothing; a splat constant of more than one
  element is a broadcast of a scalar; a broadcast_in_dim stretching unit dims is
  a broadcast, a reshape and a broadcast; an iota of rank > 1 is a 1-D iota and a broadcast; a
  returned transpose is a bitcast (its result layout is free); several results of the entry, and
  a while loop's state, are tuples of 8-byte pointers;
- a call costs its callee; a while loop one iteration of its body and condition (the trip count
  is not known statically); a case or if the largest branch, property by property.

The trn compiler's own work (what the chip is modeled to move and compute) is reported per run by
the profiler (jax_trn.profile), not here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from hlo_lowering import ir

FLOPS = "flops"
TRANSCENDENTALS = "transcendentals"
BYTES = "bytes accessed"

_TRANSCENDENTAL = frozenset(f"stablehlo.{name}" for name in (
    "exponential", "log", "logistic", "power", "sqrt", "cbrt", "rsqrt", "tanh", "sine", "cosine",
    "exponential_minus_one", "log_plus_one", "atan2"))

_ELEMENTWISE = frozenset(f"stablehlo.{name}" for name in (
    "abs", "add", "and", "ceil", "clamp", "compare", "complex", "convert", "count_leading_zeros",
    "divide", "floor", "imag", "is_finite", "maximum", "minimum", "multiply", "negate", "not",
    "or", "popcnt", "real", "reduce_precision", "remainder", "round_nearest_afz",
    "round_nearest_even", "select", "shift_left", "shift_right_arithmetic",
    "shift_right_logical", "sign", "subtract", "tan", "xor", "erf"))

# Ops that move no data of their own (XLA: parameters, constants, tuples' elements, ordering).
_NO_TRAFFIC = frozenset({"stablehlo.constant", "stablehlo.get_tuple_element", "func.return",
                         "stablehlo.return", "stablehlo.after_all"})

# Properties a reduction's body contributes per application (its bytes stay in registers).
_COMPUTE = (FLOPS, TRANSCENDENTALS)

Cost = dict[str, float]


def program_cost(module: ir.Module) -> Cost:
  """flops, transcendentals and bytes accessed of `module`'s entry function."""
  main = module.main
  cost = _block_cost(main.body, module)
  for op in main.body.ops:
    if op.name == "stablehlo.transpose" and set(op.results) & set(main.returned):
      # A returned transpose's layout is free: XLA lays the result out to make it a bitcast.
      _add(cost, {BYTES: -_bytes_accessed(op)})
  results = len(main.returned)
  if results > 1:  # XLA returns them as one tuple: its pointer table counts
    _add(cost, {BYTES: 8 * results})
  return {key: cost.get(key, 0.0) for key in (FLOPS, TRANSCENDENTALS, BYTES)}


def _block_cost(block: ir.Block, module: ir.Module) -> Cost:
  total: Cost = {}
  ops, splat_constants = _surviving_ops(block)
  for op in ops:
    _add(total, _op_cost(op, module))
  for value in splat_constants:  # the conversion writes each as a broadcast of a scalar
    _add(total, {BYTES: value.type.nbytes + value.type.dtype.itemsize})
  return total


def _surviving_ops(block: ir.Block) -> tuple[list[ir.Op], list[ir.Value]]:
  """The ops of `block` that its conversion to HLO keeps, in order, and the splat constants
  of more than one element they read: identity converts, broadcasts and reshapes, x+0, x-0
  and x·1, elementwise ops of constants and repeated broadcasts of one constant are folded
  away, then whatever no longer reaches the block's results is dropped."""
  alias: dict[ir.Value, ir.Value] = {}

  def resolve(v: ir.Value) -> ir.Value:
    while v in alias:
      v = alias[v]
    return v

  constants: dict[ir.Value, tuple] = {}  # constant value -> what identifies it
  # Constants and their broadcasts whose elements are equal (None: folded, value not known).
  splats: dict[ir.Value, float | None] = {}
  broadcasts: dict[tuple, ir.Value] = {}
  kept: list[tuple[ir.Op, list[ir.Value]]] = []
  for op in block.ops:
    operands = [resolve(v) for v in op.operands]
    if op.name == "stablehlo.constant":
      value = np.asarray(op.attrs["value"])
      constants[op.result] = (value.tobytes(), str(value.dtype), op.result.type)
      if value.size and value.tobytes() == value.flat[:1].tobytes() * value.size:  # NaNs too
        splats[op.result] = value.flat[0]
      continue
    if _is_identity(op):
      alias[op.result] = operands[0]
      continue
    if _is_elementwise(op) and operands and all(v in constants for v in operands):
      constants[op.result] = (op.name, tuple(constants[v] for v in operands), op.result.type)
      if all(v in splats for v in operands):
        splats[op.result] = None
      continue
    neutral = _neutral_operand(op.name, operands, splats)
    if neutral is not None:
      alias[op.result] = neutral
      continue
    if op.name == "stablehlo.broadcast_in_dim" and operands[0] in constants:
      key = (constants[operands[0]], op.result.type, tuple(op.attrs["broadcast_dimensions"]))
      if key in broadcasts:
        alias[op.result] = broadcasts[key]
        continue
      broadcasts[key] = op.result
      if operands[0] in splats:
        splats[op.result] = splats[operands[0]]
    kept.append((op, operands))
  live = {resolve(v) for v in block.terminator.operands}
  surviving = []
  for op, operands in reversed(kept):
    if (op is block.terminator or not op.results or op.name == "stablehlo.custom_call"
        or live.intersection(op.results)):
      surviving.append(op)
      live.update(operands)
  splat_constants = [v for v in constants if v in live and v in splats and v.type.size > 1]
  return surviving[::-1], splat_constants


def _neutral_operand(name: str, operands: list[ir.Value], splats: dict) -> ir.Value | None:
  """x for x+0, 0+x, x-0, x·1 and 1·x (same type as the result), else None."""
  if len(operands) != 2 or operands[0].type != operands[1].type:
    return None
  lhs, rhs = (splats.get(v) for v in operands)
  if name == "stablehlo.add":
    return operands[0] if rhs == 0 else operands[1] if lhs == 0 else None
  if name == "stablehlo.subtract":
    return operands[0] if rhs == 0 else None
  if name == "stablehlo.multiply":
    return operands[0] if rhs == 1 else operands[1] if lhs == 1 else None
  return None


def _is_elementwise(op: ir.Op) -> bool:
  return op.name in _ELEMENTWISE or op.name in _TRANSCENDENTAL


def _op_cost(op: ir.Op, module: ir.Module) -> Cost:
  name = op.name
  if name in _NO_TRAFFIC:
    return {}
  if name == "stablehlo.custom_call":
    return {FLOPS: -1.0, BYTES: -1.0}
  if name == "func.call":
    return _block_cost(module.functions[op.attrs["callee"]].body, module)
  if name == "stablehlo.while":
    body = {}
    for region in op.regions:
      _add(body, _block_cost(region.block, module))
    if len(op.operands) > 1:  # the loop state is a tuple: built once, and by every iteration
      _add(body, {BYTES: 2 * 8 * len(op.operands)})
    return body
  if name in ("stablehlo.case", "stablehlo.if"):
    return _largest([_block_cost(r.block, module) for r in op.regions])
  cost = {BYTES: _bytes_accessed(op)}
  out = _elements(op.results[0].type) if op.results else 0
  if name in _TRANSCENDENTAL:
    cost[TRANSCENDENTALS] = out
  elif name in _ELEMENTWISE or name == "stablehlo.bitcast_convert":
    cost[FLOPS] = out
  elif name == "stablehlo.dot_general":
    lhs = op.operands[0].shape
    contracting = op.attrs["dot_dimension_numbers"].get("lhs_contracting_dimensions", [])
    cost[FLOPS] = 2 * out * math.prod(lhs[d] for d in contracting)
  elif name == "stablehlo.dot":
    cost[FLOPS] = 2 * out * (op.operands[0].shape[-1] if op.operands[0].shape else 1)
  elif name == "stablehlo.convolution":
    cost[FLOPS] = _convolution_flops(op)
  elif name in ("stablehlo.reduce", "stablehlo.reduce_window"):
    applications = (_elements(op.operands[0].type) - out if name == "stablehlo.reduce" else
                    (math.prod(op.attrs["window_dimensions"]) - 1) * out)
    _add(cost, _scaled(_block_cost(op.regions[0].block, module), applications))
  elif name == "stablehlo.sort":
    n = _elements(op.operands[0].type)
    cost[FLOPS] = n * math.ceil(math.log2(n)) if n > 1 else 0
  elif name in ("stablehlo.rng", "stablehlo.rng_bit_generator"):
    cost[TRANSCENDENTALS] = sum(_elements(r.type) for r in op.results)
  elif name == "stablehlo.scatter":
    updates = op.operands[len(op.operands) // 2 + 1]  # (inputs..., indices, updates...)
    _add(cost, _scaled(_block_cost(op.regions[0].block, module), _elements(updates.type)))
  return cost


def _bytes_accessed(op: ir.Op) -> float:
  """The op's memory traffic by XLA's rules (module docstring)."""
  name = op.name
  out = sum(r.type.nbytes for r in op.results)
  if name in ("stablehlo.slice", "stablehlo.real_dynamic_slice"):
    return 2 * out
  if name == "stablehlo.dynamic_slice":
    return 2 * out + op.operands[1].type.nbytes  # XLA counts the first index only
  if name == "stablehlo.gather":
    return 2 * out + op.operands[1].type.nbytes
  if name == "stablehlo.dynamic_update_slice":
    return 2 * op.operands[1].type.nbytes + op.operands[2].type.nbytes
  if name == "stablehlo.scatter":
    n = len(op.operands) // 2
    return 3 * sum(v.type.nbytes for v in op.operands[n + 1:]) + op.operands[n].type.nbytes
  if name == "stablehlo.tuple":
    return 8 * len(op.operands)  # the tuple's pointer table
  if name == "stablehlo.iota" and len(op.results[0].shape) > 1:
    # HLO makes it a 1-D iota broadcast along the other dims.
    t = op.results[0].type
    line = t.shape[op.attrs["iota_dimension"]] * t.dtype.itemsize
    return 2 * line + out
  moved = out + sum(v.type.nbytes for v in op.operands)
  if name == "stablehlo.broadcast_in_dim" and _expands_unit_dims(op):
    # HLO broadcasts only into new dims: the converter first drops the operand's unit dims (a
    # broadcast to the same shape and a reshape, each reading and writing the operand).
    moved += 4 * op.operands[0].type.nbytes
  return moved


def _is_identity(op: ir.Op) -> bool:
  """A convert, broadcast or reshape to its operand's own type, which the conversion to HLO
  removes."""
  return (op.name in ("stablehlo.convert", "stablehlo.broadcast_in_dim", "stablehlo.reshape")
          and op.operands[0].type == op.results[0].type)


def _expands_unit_dims(op: ir.Op) -> bool:
  """Whether broadcast_in_dim stretches a size-1 operand dim to a larger result dim."""
  result = op.results[0].shape
  return any(size == 1 and result[d] != 1
             for size, d in zip(op.operands[0].shape, op.attrs["broadcast_dimensions"]))


def _convolution_flops(op: ir.Op) -> float:
  """2 × input features per group × output features × batch per group × the (kernel, output)
  position pairs whose input index is a real element, per spatial dimension."""
  lhs, rhs = op.operands[0].shape, op.operands[1].shape
  result = op.results[0].shape
  dims = op.attrs["dimension_numbers"]
  spatial = len(dims["input_spatial_dimensions"])
  strides = op.attrs.get("window_strides") or [1] * spatial
  padding = op.attrs.get("padding")
  padding = [[0, 0]] * spatial if padding is None else [list(p) for p in padding]
  lhs_dilation = op.attrs.get("lhs_dilation") or [1] * spatial
  rhs_dilation = op.attrs.get("rhs_dilation") or [1] * spatial
  positions = 1
  for s in range(spatial):
    size = lhs[dims["input_spatial_dimensions"][s]]
    kernel = rhs[dims["kernel_spatial_dimensions"][s]]
    output = result[dims["output_spatial_dimensions"][s]]
    positions *= _valid_positions(size, kernel, output, strides[s], padding[s][0],
                                  lhs_dilation[s], rhs_dilation[s])
  features = lhs[dims["input_feature_dimension"]] // int(op.attrs.get("feature_group_count", 1))
  batch = lhs[dims["input_batch_dimension"]] // int(op.attrs.get("batch_group_count", 1))
  return 2 * features * result[dims["output_feature_dimension"]] * batch * positions


def _valid_positions(size: int, kernel: int, output: int, stride: int, pad_low: int,
                     base_dilation: int, window_dilation: int) -> int:
  """How many (kernel index, output index) pairs of one spatial dimension read a real input
  element (not padding, not a hole of the base dilation)."""
  count = 0
  for k in range(kernel):
    for o in range(output):
      index = o * stride - pad_low + k * window_dilation
      if index % base_dilation == 0 and 0 <= index // base_dilation < size:
        count += 1
  return count


def _elements(t: ir.TensorType) -> int:
  return math.prod(t.shape)


def _add(total: Cost, cost: Cost) -> None:
  for key, value in cost.items():
    total[key] = total.get(key, 0.0) + value


def _scaled(cost: Cost, factor: int) -> Cost:
  return {key: cost[key] * factor for key in _COMPUTE if key in cost}


def _largest(costs: Iterable[Cost]) -> Cost:
  largest: Cost = {}
  for cost in costs:
    for key, value in cost.items():
      largest[key] = max(largest.get(key, value), value)
  return largest
