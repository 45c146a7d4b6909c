"""widen-int4: int4 and uint4 values computed as int8 and uint8, wrapped back to 4 bits wherever
an op can leave the 4-bit range, so every result is XLA CPU's (docs/numerics.md, "int4 and
uint4"). NeuronCores have no 4-bit type; the program format holds s4/u4 only as the type of a
parameter or an output, one value per byte in its low nibble (the bytes jaxlib transfers).

Inside the program an int4 value is an int8 in [-8, 7] (sign-extended) and a uint4 one a uint8
in [0, 15]. Each op with a 4-bit result is followed by the wrap to 4 bits (int4: shift left 4,
then arithmetic shift right 4; uint4: and 15), except:
- ops that keep values in range: data movement, select, max/min, and/or/xor, clamp, sign, not
  and shift_right_arithmetic of int4, control flow and sort (their bodies are wrapped), and
  reductions, scatters and collectives whose body is one max/min/and/or/xor;
- a reduction, scatter or collective whose body is one other op (add, multiply): its body stays
  one op, computed in 8 bits (wrapping mod 256, which keeps the value mod 16), and its results
  are wrapped;
- converts to 4 bits from a float: saturated to [-8, 7] / [0, 15] (NaN: 0), as XLA does;
- shift_right_logical of int4: shifts the 4-bit pattern (x and 15), then wraps;
  shift_right_arithmetic of uint4: shifts the pattern with bit 3 as its sign (as XLA does: its
  shift is on the bits), sign-extended to 8 bits first, then wraps;
- count_leading_zeros: counts in the 4-bit pattern (clz(x and 15) - 4);
- bitcast_convert from or to 4 bits: the nibbles are split from or joined into bytes (element 0
  in the low nibble, as XLA packs them), through uint8;
- constants: their values as int8/uint8.
XLA CPU's population_count of an int4 counts the sign-extended 8-bit value (popcnt(-1) is 8,
which wraps to -8); this pass gives the same. An entry argument bound to an int4 buffer is
sign-extended from its low nibble once at the top (uint4: masked), so high-nibble bits a host
array may carry are ignored, as ml_dtypes ignores them; an int4 result is masked to its low
nibble just before the return.

Requires: calls inlined (inline-calls).
Ensures: no s4 or u4 value, block argument or function result type is left; `main.nibble_args`
/ `main.nibble_results` name the entry's arguments and results that were int4 or uint4 (their
buffers stay s4/u4); every new op has the location of the op it wraps.
Runs after: narrow-float64, before partition-spmd and decompose-complex.
"""

from __future__ import annotations

import numpy as np

from hlo_lowering.ir import (CONTROL_FLOW, Block, Module, Op, TensorType, Value, replace_uses,
                             walk_ops)
from hlo_lowering.passes.expansion import Emitter
from hlo_lowering.program import DType

WIDE = {DType.S4: DType.S8, DType.U4: DType.U8}

# Ops whose 4-bit results hold values in range when their operands do.
_IN_RANGE = frozenset({
    "stablehlo.reshape", "stablehlo.broadcast_in_dim", "stablehlo.transpose", "stablehlo.slice",
    "stablehlo.dynamic_slice", "stablehlo.dynamic_update_slice", "stablehlo.concatenate",
    "stablehlo.pad", "stablehlo.gather", "stablehlo.reverse", "stablehlo.select",
    "stablehlo.copy", "stablehlo.optimization_barrier", "stablehlo.sort", "stablehlo.maximum",
    "stablehlo.minimum", "stablehlo.and", "stablehlo.or", "stablehlo.xor", "stablehlo.clamp",
    "stablehlo.sign", "stablehlo.constant",
    "stablehlo.all_gather", "stablehlo.all_to_all", "stablehlo.collective_permute",
    "stablehlo.collective_broadcast", "stablehlo.custom_call", *CONTROL_FLOW})
# Ops with a combining body (reduce-like): one body op computes in 8 bits, results wrapped.
_COMBINING = frozenset({
    "stablehlo.reduce", "stablehlo.reduce_window", "stablehlo.scatter",
    "stablehlo.select_and_scatter", "stablehlo.all_reduce", "stablehlo.reduce_scatter"})


def _single_body_op(op: Op) -> Op | None:
  """The one op of a combining op's body (`return op(a, b)`), or None."""
  if op.name not in _COMBINING or len(op.regions) != 1:
    return None
  ops = op.regions[-1].block.ops
  return ops[0] if len(ops) == 2 and not ops[0].regions else None


class _Widener:
  def __init__(self, narrow: dict[Value, DType]):
    self.narrow = narrow  # every value that was 4-bit -> S4 or U4

  def block(self, block: Block) -> None:
    new_ops: list[Op] = []
    for op in block.ops:
      single = _single_body_op(op)
      for region in op.regions:
        if single is None:
          self.block(region.block)
      new_ops.extend(self.op(op, single))
    block.ops = new_ops

  def op(self, op: Op, single: Op | None) -> list[Op]:
    e = Emitter(op, [])
    name = op.name
    if name == "stablehlo.constant" and op.result in self.narrow:
      op.attrs["value"] = _wide_constant(op.attrs["value"], self.narrow[op.result])
      return [op]
    if name == "stablehlo.bitcast_convert" and (op.operands[0] in self.narrow
                                                or op.result in self.narrow):
      self._rewire(self._bitcast(e, op.operands[0], op.result), op.result, e)
      return e.new_ops
    results = [r for r in op.results if r in self.narrow]
    if not results or self._in_range(op, single):
      return [op]
    if name == "stablehlo.convert" and not _is_integer(op.operands[0]):
      return self._saturate(op, e)
    if name == "stablehlo.shift_right_logical" and self.narrow[op.result] == DType.S4:
      op.operands[0] = e.binary_splat("and", op.operands[0], 15)
    if name == "stablehlo.shift_right_arithmetic":  # of uint4: bit 3 is the sign
      op.operands[0] = self._wrap(e, op.operands[0], DType.S4)
    if name == "stablehlo.count_leading_zeros":
      self._rewire(e.binary_splat("subtract", self._clz_of_nibble(e, op), 4), op.result, e)
      return e.new_ops
    e.new_ops.append(op)
    for r in results:
      raw = Value(r.type)
      op.results[op.results.index(r)] = raw
      self._rewire(self._wrap(e, raw, self.narrow[r]), r, e)
    return e.new_ops

  def _in_range(self, op: Op, single: Op | None) -> bool:
    if op.name in _COMBINING:
      return single is None or single.name in _IN_RANGE
    return op.name in _IN_RANGE or (
        op.name in ("stablehlo.not", "stablehlo.shift_right_arithmetic")
        and self.narrow[op.result] == DType.S4)

  @staticmethod
  def _rewire(final: Value, original: Value, e: Emitter) -> None:
    """Makes the last new op (which computed `final`) produce `original`, whose users then
    read it unchanged."""
    producer = e.new_ops[-1]
    producer.results[producer.results.index(final)] = original
    original.type = final.type

  @staticmethod
  def _wrap(e: Emitter, x: Value, dtype: DType) -> Value:
    """x (8 bits) wrapped to `dtype`'s 4 bits, in its 8-bit form."""
    if dtype == DType.U4:
      return e.binary_splat("and", x, 15)
    return e.binary_splat("shift_right_arithmetic", e.binary_splat("shift_left", x, 4), 4)

  def _saturate(self, op: Op, e: Emitter) -> list[Op]:
    """A float -> 4-bit convert: converted to 8 bits (saturating, NaN -> 0), then clamped."""
    e.new_ops.append(op)
    raw = Value(op.result.type)
    result, op.results = op.result, [raw]
    low, high = (-8, 7) if self.narrow[result] == DType.S4 else (0, 15)
    clamped = e.binary_splat("minimum", raw, high)
    if low:
      clamped = e.binary_splat("maximum", clamped, low)
    self._rewire(clamped, result, e)
    return e.new_ops

  def _clz_of_nibble(self, e: Emitter, op: Op) -> Value:
    nibble = e.binary_splat("and", op.operands[0], 15)
    return e.emit("stablehlo.count_leading_zeros", [nibble], nibble.shape, nibble.dtype)

  def _bitcast(self, e: Emitter, x: Value, result: Value) -> Value:
    source, target = self.narrow.get(x), self.narrow.get(result)
    if source and target:  # int4 <-> uint4: the same nibble, read with the other sign
      return self._wrap(e, _convert(e, x, result.dtype), target)
    if source:
      return _join_nibbles(e, x, result.dtype)
    return self._split_bytes(e, x, result.shape, target)

  def _split_bytes(self, e: Emitter, x: Value, shape, target: DType) -> Value:
    """x's bytes as 4-bit values, element 0 the low nibble of byte 0: result `shape`."""
    nbytes = x.dtype.itemsize
    byte_shape = (*x.shape, nbytes) if nbytes > 1 else x.shape
    data = _bitcast(e, x, DType.U8, byte_shape)
    data = e.reshape(data, (*x.shape, nbytes, 1))
    halves = []
    for nibble in (e.binary_splat("and", data, 15), e.binary_splat("shift_right_logical", data, 4)):
      if target == DType.S4:
        nibble = self._wrap(e, _convert(e, nibble, DType.S8), target)
      halves.append(nibble)
    return e.reshape(e.concatenate(halves, len(x.shape) + 1), shape)


def _is_integer(v: Value) -> bool:
  return v.dtype.is_signed_int or v.dtype.is_unsigned_int


def _convert(e: Emitter, x: Value, dtype: DType) -> Value:
  return x if x.dtype == dtype else e.emit("stablehlo.convert", [x], x.shape, dtype)


def _bitcast(e: Emitter, x: Value, dtype: DType, shape) -> Value:
  if x.dtype == dtype and tuple(shape) == x.shape:
    return x
  return e.emit("stablehlo.bitcast_convert", [x], shape, dtype)


def _join_nibbles(e: Emitter, x: Value, dtype: DType) -> Value:
  """x's 4-bit values [..., 2n] joined into n bytes per element (element 0 the low nibble),
  read as `dtype` [...]."""
  *outer, count = x.shape
  pairs = e.reshape(_convert(e, x, DType.U8), (*outer, count // 2, 2))
  start = [0] * len(pairs.shape)
  limit = list(pairs.shape)
  low = e.slice(pairs, start, limit[:-1] + [1])
  high = e.slice(pairs, start[:-1] + [1], limit)
  data = e.binary("or", e.binary_splat("and", low, 15), e.binary_splat("shift_left", high, 4))
  if count == 2:
    return _bitcast(e, e.reshape(data, outer), dtype, outer)
  return _bitcast(e, e.reshape(data, (*outer, count // 2)), dtype, outer)


def _wide_constant(value: np.ndarray, dtype: DType) -> np.ndarray:
  """A 4-bit constant's values (ml_dtypes int4/uint4) as int8/uint8."""
  wide = np.asarray(value).astype(WIDE[dtype].numpy)
  if wide.size and np.all(wide == wide.flat[0]):  # kept a zero-stride splat
    return np.broadcast_to(wide.flat[0], wide.shape)
  return wide


def _retype(module: Module) -> dict[Value, DType]:
  narrow: dict[Value, DType] = {}

  def widen(v: Value) -> None:
    if v.dtype in WIDE and v not in narrow:
      narrow[v] = v.dtype
      v.type = TensorType(v.shape, WIDE[v.dtype])

  for function in module.functions.values():
    for v in function.args:
      widen(v)
    for op in walk_ops(function.body):
      for v in op.results:
        widen(v)
      for region in op.regions:
        for v in region.block.args:
          widen(v)
    function.result_types = [TensorType(t.shape, WIDE.get(t.dtype, t.dtype))
                             for t in function.result_types]
  return narrow


def _bind_entry(module: Module, narrow: dict[Value, DType], results: list[DType]) -> None:
  """The entry's 4-bit arguments read from their low nibble; its int4 results written as their
  low nibble."""
  main = module.main
  main.nibble_args = {i for i, a in enumerate(main.args) if a in narrow}
  main.nibble_results = {i for i, d in enumerate(results) if d in WIDE}
  loads: list[Op] = []
  for i in sorted(main.nibble_args):
    arg = main.args[i]
    first_user = next((op for op in walk_ops(main.body) if arg in op.operands), None)
    e = Emitter(first_user or main.body.terminator, loads)
    # The loads are not in the body yet: only the arguments' other users read them.
    replace_uses(main.body, {arg: _Widener._wrap(e, arg, narrow[arg])})
  main.body.ops[:0] = loads
  ret = main.body.terminator
  stores: list[Op] = []
  e = Emitter(ret, stores)
  for i, d in enumerate(results):
    if d == DType.S4:
      ret.operands[i] = e.binary_splat("and", ret.operands[i], 15)
  main.body.ops[-1:-1] = stores


def run(module: Module) -> None:
  results = [t.dtype for t in module.main.result_types]
  narrow = _retype(module)
  if not narrow:
    return
  widener = _Widener(narrow)
  for function in module.functions.values():
    widener.block(function.body)
  _bind_entry(module, narrow, results)
