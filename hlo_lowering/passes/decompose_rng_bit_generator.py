"""decompose-rng-bit-generator: stablehlo.rng_bit_generator becomes the integer ops that XLA's
RngBitGeneratorExpander builds (xla/hlo/builder/lib/prng.cc), so the bits and the new state
equal XLA CPU's bit for bit.

DEFAULT means PHILOX (XLA's CPU backend expands DEFAULT as Philox). The state's element 0 is the
key (u64: low word k0, high word k1) and is returned unchanged at the front of the new state.

- THREE_FRY (state u64[2]): the counter is state[1]. Threefry2x32 (20 rounds, key schedule with
  parity 0x1BD11BDA) runs on counters `state[1] + i` (u64 split into low/high u32 words) for
  i < M; the new counter is state[1] + M. 64-bit outputs: M = the output's size, each result is
  low | high << 32. 32-bit (and narrower) outputs: the shape is split in two halves along its
  first even dim (or its largest dim, rounded up, when none is even), M = the half's size, the
  two output words are interleaved along that dim (word 0 at even, word 1 at odd indices) and
  an odd dim is sliced back; 8/16-bit outputs truncate the 32-bit words.
- PHILOX (state u64[3]: counter = (state[1] low, state[2] high) as a u128; state u64[2]: the
  counter is (state[1], state[0]) and only its new low word is returned): Philox4x32-10 on the
  key scrambled with W32 constants per round, counters `c + i` (u128 add with carry) for
  i < n = ceil(words / 4); the four output words of counter i are elements 4i..4i+3 (64-bit
  outputs: words 0|1<<32 and 2|3<<32 are elements 2i, 2i+1); the new counter is c + n.

32×32→64 products are u64 multiplies; every op is an integer elementwise op, iota, reshape,
slice, concatenate, broadcast_in_dim, compare/select, which the lowering rules already handle.

Requires: calls inlined (inline-calls).
Ensures: no rng_bit_generator is left (also inside while/case/if regions); an output type other
than u8/u16/u32/u64, or a state shape the algorithm does not take, is a CompileError naming the
op and the algorithm; each new op keeps the rng op's location.
Runs after: unroll-static-loops, before canonicalize (which folds a constant state) and
fuse-elementwise (which fuses the rounds).
"""

from __future__ import annotations

import math

import numpy as np

from hlo_lowering.errors import CompileError
from hlo_lowering.ir import Module, Op, TensorType, Value, control_flow_blocks, replace_uses
from hlo_lowering.program import DType

_NAME = "stablehlo.rng_bit_generator"
U32, U64 = DType.U32, DType.U64
_OUTPUT_TYPES = (DType.U8, DType.U16, DType.U32, DType.U64)

_THREEFRY_ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)
_THREEFRY_PARITY = 0x1BD11BDA
_PHILOX_W32 = (0x9E3779B9, 0xBB67AE85)
_PHILOX_M4X32 = (0xD2511F53, 0xCD9E8D57)
_PHILOX_ROUNDS = 10


def algorithm(op: Op) -> str:
  """THREE_FRY, PHILOX or DEFAULT, from the op's `rng_algorithm` attribute."""
  text = str(op.attrs.get("rng_algorithm", "DEFAULT"))
  for name in ("THREE_FRY", "PHILOX", "DEFAULT"):
    if name in text:
      return name
  raise CompileError(f"{op.describe()}: unknown rng_algorithm {text}")


class _Emitter:
  """Appends integer ops with the rng op's location."""

  def __init__(self, op: Op, new_ops: list[Op]):
    self.loc = op.loc
    self.new_ops = new_ops

  def emit(self, name: str, operands: list[Value], shape, dtype: DType, **attrs) -> Value:
    new = Op(name, operands, [TensorType(tuple(shape), dtype)], attrs, None, self.loc)
    self.new_ops.append(new)
    return new.result

  def constant(self, value: int, dtype: DType, shape=()) -> Value:
    scalar = self.emit("stablehlo.constant", [], (), dtype, value=np.array(value, dtype.numpy))
    if not shape:
      return scalar
    return self.broadcast(scalar, shape)

  def broadcast(self, x: Value, shape) -> Value:
    """A scalar `x` over `shape`."""
    if tuple(shape) == x.shape:
      return x
    return self.emit("stablehlo.broadcast_in_dim", [x], shape, x.dtype, broadcast_dimensions=[])

  def binary(self, name: str, a: Value, b: Value | int) -> Value:
    if not isinstance(b, Value):
      b = self.constant(b, a.dtype, a.shape)
    return self.emit(f"stablehlo.{name}", [a, b], a.shape, a.dtype)

  def convert(self, x: Value, dtype: DType) -> Value:
    return self.emit("stablehlo.convert", [x], x.shape, dtype)

  def reshape(self, x: Value, shape) -> Value:
    if tuple(shape) == x.shape:
      return x
    return self.emit("stablehlo.reshape", [x], shape, x.dtype)

  def slice(self, x: Value, start: list[int], limit: list[int]) -> Value:
    shape = [hi - lo for lo, hi in zip(start, limit)]
    return self.emit("stablehlo.slice", [x], shape, x.dtype, start_indices=list(start),
                     limit_indices=list(limit), strides=[1] * len(start))

  def element(self, vector: Value, i: int) -> Value:
    """vector[i] as a scalar."""
    return self.reshape(self.slice(vector, [i], [i + 1]), ())

  def concatenate(self, parts: list[Value], dim: int) -> Value:
    shape = list(parts[0].shape)
    shape[dim] = sum(p.shape[dim] for p in parts)
    return self.emit("stablehlo.concatenate", parts, shape, parts[0].dtype, dimension=dim)

  def iota_u64(self, n: int) -> Value:
    return self.emit("stablehlo.iota", [], (n,), U64, iota_dimension=0)

  def low_high(self, x: Value) -> tuple[Value, Value]:
    """A u64 as its low and high u32 words."""
    return self.convert(x, U32), self.convert(self.binary("shift_right_logical", x, 32), U32)

  def join(self, low: Value, high: Value) -> Value:
    """Two u32 words as one u64."""
    return self.binary("or", self.convert(low, U64),
                       self.binary("shift_left", self.convert(high, U64), 32))

  def add_u128(self, low: Value, high: Value, addend: Value) -> tuple[Value, Value]:
    """(low, high) + addend with carry; low/high are u64 scalars, addend a u64 tensor."""
    low = self.broadcast(low, addend.shape)
    new_low = self.binary("add", low, addend)
    carry = self.emit("stablehlo.compare", [new_low, low], addend.shape, DType.PRED,
                      comparison_direction="LT", compare_type="UNSIGNED")
    high = self.broadcast(high, addend.shape)
    new_high = self.emit("stablehlo.select", [carry, self.binary("add", high, 1), high],
                         addend.shape, U64)
    return new_low, new_high


def _rotate_left(e: _Emitter, v: Value, distance: int) -> Value:
  return e.binary("or", e.binary("shift_left", v, distance),
                  e.binary("shift_right_logical", v, 32 - distance))


def _threefry2x32(e: _Emitter, x: list[Value], key: tuple[Value, Value]) -> list[Value]:
  shape = x[0].shape
  ks = [e.broadcast(key[0], shape), e.broadcast(key[1], shape)]
  ks.append(e.binary("xor", e.binary("xor", ks[0], ks[1]), _THREEFRY_PARITY))
  x = [e.binary("add", x[0], ks[0]), e.binary("add", x[1], ks[1])]
  for block in range(5):
    rotations = _THREEFRY_ROTATIONS[:4] if block % 2 == 0 else _THREEFRY_ROTATIONS[4:]
    for r in rotations:
      x0 = e.binary("add", x[0], x[1])
      x = [x0, e.binary("xor", x0, _rotate_left(e, x[1], r))]
    x = [e.binary("add", x[0], ks[(block + 1) % 3]),
         e.binary("add", e.binary("add", x[1], ks[(block + 2) % 3]), block + 1)]
  return x


def _split_dim(shape: tuple[int, ...]) -> int:
  """XLA's SplitShapeIntoHalves: the first even dim, else the first largest one."""
  for i, d in enumerate(shape):
    if d % 2 == 0:
      return i
  return max(range(len(shape)), key=lambda i: (shape[i], -i))


def _threefry(e: _Emitter, key: tuple[Value, Value], counter: Value,
              shape: tuple[int, ...], dtype: DType) -> tuple[Value, Value | None]:
  """Bits of `shape`/`dtype` (None when empty) and the new counter (u64 scalar)."""
  if dtype == U64:
    count = math.prod(shape)
  elif shape:
    split = _split_dim(shape)
    half = list(shape)
    half[split] = -(-shape[split] // 2)
    count = math.prod(half)
  else:
    count = 1
  new_counter = e.binary("add", counter, count)
  if math.prod(shape) == 0:
    return new_counter, None
  inputs = e.binary("add", e.broadcast(counter, (count,)), e.iota_u64(count))
  words = _threefry2x32(e, list(e.low_high(inputs)), key)
  if dtype == U64:
    return new_counter, e.reshape(e.join(*words), shape)
  if not shape:
    bits = e.reshape(words[0], ())
  else:
    half_shape = half[:split + 1] + [1] + half[split + 1:]
    pair = e.concatenate([e.reshape(w, half_shape) for w in words], split + 1)
    even = list(shape)
    even[split] = 2 * half[split]
    bits = e.reshape(pair, even)
    if even[split] != shape[split]:
      bits = e.slice(bits, [0] * len(shape), list(shape))
  if dtype != U32:
    bits = e.convert(bits, dtype)
  return new_counter, bits


def _philox4x32(e: _Emitter, x: list[Value], key: tuple[Value, Value]) -> list[Value]:
  shape = x[0].shape
  k = [e.broadcast(key[0], shape), e.broadcast(key[1], shape)]
  for round_ in range(_PHILOX_ROUNDS):
    if round_:
      k = [e.binary("add", k[0], _PHILOX_W32[0]), e.binary("add", k[1], _PHILOX_W32[1])]
    p0 = e.binary("multiply", e.convert(x[0], U64), _PHILOX_M4X32[0])
    p1 = e.binary("multiply", e.convert(x[2], U64), _PHILOX_M4X32[1])
    lo0, hi0 = e.low_high(p0)
    lo1, hi1 = e.low_high(p1)
    x = [e.binary("xor", e.binary("xor", hi1, x[1]), k[0]), lo1,
         e.binary("xor", e.binary("xor", hi0, x[3]), k[1]), lo0]
  return x


def _philox(e: _Emitter, key: tuple[Value, Value], low: Value, high: Value,
            shape: tuple[int, ...], dtype: DType) -> tuple[tuple[Value, Value], Value | None]:
  """Bits of `shape`/`dtype` (None when empty) and the new u128 counter (two u64 scalars)."""
  elements = math.prod(shape)
  words = elements * (2 if dtype == U64 else 1)
  n = -(-words // 4)
  new_counter = e.add_u128(low, high, e.constant(n, U64))
  if elements == 0:
    return new_counter, None
  c_low, c_high = e.add_u128(low, high, e.iota_u64(n))
  out = _philox4x32(e, [*e.low_high(c_low), *e.low_high(c_high)], key)
  if dtype == U64:
    out = [e.join(out[0], out[1]), e.join(out[2], out[3])]
  columns = e.concatenate([e.reshape(w, (n, 1)) for w in out], 1)
  flat = e.reshape(columns, (n * len(out),))
  if flat.shape[0] != elements:
    flat = e.slice(flat, [0], [elements])
  bits = e.reshape(flat, shape)
  if dtype not in (U32, U64):
    bits = e.convert(bits, dtype)
  return new_counter, bits


def _decompose(op: Op, new_ops: list[Op]) -> list[Value]:
  e = _Emitter(op, new_ops)
  name = algorithm(op)
  name = "PHILOX" if name == "DEFAULT" else name
  state = op.operands[0]
  out_type = op.results[1].type
  state_size = state.shape[0] if len(state.shape) == 1 else -1
  if out_type.dtype not in _OUTPUT_TYPES:
    raise CompileError(f"{op.describe()}: rng_bit_generator ({name}) output "
                       f"{out_type.dtype.name.lower()} is not supported: only u8, u16, u32 "
                       "and u64 bits (what XLA's CPU backend and JAX generate)")
  accepted = (2,) if name == "THREE_FRY" else (2, 3)
  if state.dtype != U64 or state_size not in accepted:
    raise CompileError(f"{op.describe()}: rng_bit_generator {name} takes a u64"
                       f"{list(accepted)} state, not {state.type}")
  key_u64 = e.element(state, 0)
  key = e.low_high(key_u64)
  shape = out_type.shape
  if name == "THREE_FRY":
    new_counter, bits = _threefry(e, key, e.element(state, 1), shape, out_type.dtype)
    new_state = [key_u64, new_counter]
  else:
    high = e.element(state, 2) if state_size == 3 else key_u64
    (new_low, new_high), bits = _philox(e, key, e.element(state, 1), high, shape,
                                        out_type.dtype)
    new_state = [key_u64, new_low] + ([new_high] if state_size == 3 else [])
  state_out = e.concatenate([e.reshape(v, (1,)) for v in new_state], 0)
  if bits is None:
    bits = e.emit("stablehlo.constant", [], shape, out_type.dtype,
                  value=np.zeros(shape, out_type.dtype.numpy))
  return [state_out, bits]


def run(module: Module) -> None:
  for function in module.functions.values():
    for block in list(control_flow_blocks(function.body)):
      if not any(op.name == _NAME for op in block.ops):
        continue
      new_ops: list[Op] = []
      replaced: dict[Value, Value] = {}
      for op in block.ops:
        if op.name != _NAME:
          new_ops.append(op)
          continue
        replaced.update(zip(op.results, _decompose(op, new_ops)))
      block.ops = new_ops
      replace_uses(block, replaced)
