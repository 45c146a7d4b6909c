"""decompose-complex: every complex64 value becomes a pair of float32 values (real, imaginary),
and every op on complex values the float32 ops that compute its pair.

NeuronCores have no complex type. The entry function's complex64 arguments and results stay
complex64 buffers (interleaved re, im): the program declares them c64 and reads them as f32
[..., 2] (docs/program-format.md), so an argument is split with two slices of its last dim and
a result packed with one concatenate, on the device, with no host-side copy. Inside, ops map to:
- constant, iota, complex, real, imag, convert: the parts themselves (real → complex: imag = 0;
  complex → real: the real part, as XLA converts);
- data movement and linear ops (broadcast, reshape, transpose, slice, reverse, concatenate, pad,
  gather, scatter, dynamic_(update_)slice, select, add, subtract, negate, the collectives, and
  reduce / reduce_window / scatter / all_reduce / reduce_scatter whose body is add, subtract or
  a plain update): the same op on each part (the body rebuilt on float32);
- multiply, divide, abs, sign, sqrt, rsqrt, exponential, exponential_minus_one, log,
  log_plus_one, sine, cosine, tan, tanh, power: complex_arithmetic's formulas (XLA CPU's);
  compare EQ / NE: both parts;
- dot_general and convolution: 4 real products (re = ac − bd, im = ad + bc), not Gauss's 3,
  which rounds differently from the CPU backend;
- reduce with a multiply body: a pairwise tree of complex multiplies; reduce_window with one
  (jnp.cumprod): a Hillis–Steele scan;
- fft: complex_fft's DFT matmuls;
- while / case / if / optimization_barrier carry each complex value as its two parts; sort sorts
  a complex operand as its two parts (JAX's complex comparator then reads as a two-key one).
Other ops on complex values raise a CompileError naming the op.

Requires: calls inlined (inline-calls).
Ensures: no complex64 value is left in the entry function (also in its while/case/if regions
and reduce/scatter bodies); `complex_args` / `complex_results` of the entry function name the
arguments and results that are complex64 buffers, typed f32 [..., 2]; new ops keep the
decomposed op's location.
Runs after: strip-single-device-sharding, before unroll-static-loops and canonicalize (which
then see only float32 ops).
"""

from __future__ import annotations

import math

import numpy as np

from hlo_lowering.errors import CompileError, UNIMPLEMENTED
from hlo_lowering.ir import (CONTROL_FLOW, Block, Module, Op, Region, TensorType, Value,
                             clone_block, replace_uses, walk_ops)
from hlo_lowering.passes import complex_fft
from hlo_lowering.passes.complex_arithmetic import F32, Pair, PairMath
from hlo_lowering.passes.expansion import Emitter
from hlo_lowering.program import DType

C64 = DType.C64

# The same op on the real parts and on the imaginary parts (other operands shared).
_COMPONENTWISE = frozenset({
    "stablehlo.broadcast_in_dim", "stablehlo.reshape", "stablehlo.transpose", "stablehlo.slice",
    "stablehlo.reverse", "stablehlo.concatenate", "stablehlo.pad", "stablehlo.gather",
    "stablehlo.scatter", "stablehlo.dynamic_slice", "stablehlo.dynamic_update_slice",
    "stablehlo.select", "stablehlo.add", "stablehlo.subtract", "stablehlo.negate",
    "stablehlo.copy", "stablehlo.reduce", "stablehlo.reduce_window",
    # Collectives move or sum each part alone (a psum of complex values sums both parts).
    "stablehlo.all_reduce", "stablehlo.reduce_scatter", "stablehlo.all_gather",
    "stablehlo.all_to_all", "stablehlo.collective_permute", "stablehlo.collective_broadcast",
})
# Body ops that act on each part alone: a body made of them is rebuilt on float32.
_LINEAR_BODY = frozenset({"stablehlo.add", "stablehlo.subtract", "stablehlo.negate",
                          "stablehlo.return"})
_UNARY = {"stablehlo.abs": "abs_", "stablehlo.sign": "sign", "stablehlo.sqrt": "sqrt",
          "stablehlo.rsqrt": "rsqrt", "stablehlo.exponential": "exp",
          "stablehlo.exponential_minus_one": "expm1", "stablehlo.log": "log",
          "stablehlo.log_plus_one": "log1p", "stablehlo.sine": "sin", "stablehlo.cosine": "cos",
          "stablehlo.tanh": "tanh", "stablehlo.tan": "tan"}
_BINARY = {"stablehlo.multiply": "multiply", "stablehlo.divide": "divide",
           "stablehlo.power": "power"}
# Ops whose operands and results are carried part by part (each complex value as two).
_CARRIERS = frozenset({*CONTROL_FLOW, "stablehlo.optimization_barrier", "stablehlo.return"})


def _is_complex(v: Value) -> bool:
  return v.dtype == C64


def _f32(t: TensorType) -> TensorType:
  return TensorType(t.shape, F32) if t.dtype == C64 else t


def _unsupported(op: Op, why: str = "") -> CompileError:
  return CompileError(f"{op.describe()}: complex64 {op.name} is not supported on trn"
                      f"{': ' + why if why else ''} (complex values run as float32 pairs; "
                      "docs/numerics.md lists the complex ops)", UNIMPLEMENTED)


def _split_constant(value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """Real and imaginary f32 arrays; a splat stays a zero-stride splat."""
  if value.size and not any(value.strides):
    scalar = value.reshape(-1)[0]
    return (np.broadcast_to(np.float32(scalar.real), value.shape),
            np.broadcast_to(np.float32(scalar.imag), value.shape))
  return (np.ascontiguousarray(value.real, dtype=np.float32),
          np.ascontiguousarray(value.imag, dtype=np.float32))


class _Decomposer:
  def __init__(self):
    self.pairs: dict[Value, Pair] = {}
    self.replaced: dict[Value, Value] = {}  # real-typed results now computed from parts
    self.constants: dict[Value, np.ndarray] = {}  # complex constants, by their old value

  def value(self, v: Value) -> Value:
    return self.replaced.get(v, v)

  def parts(self, v: Value) -> tuple[Value, Value | None]:
    """A complex value's pair, or (the real value, None)."""
    return self.pairs[v] if _is_complex(v) else (self.value(v), None)

  def flat(self, values: list[Value]) -> list[Value]:
    out: list[Value] = []
    for v in values:
      out.extend(self.pairs[v] if _is_complex(v) else (self.value(v),))
    return out

  def split_args(self, block: Block) -> None:
    """Each complex block argument becomes two f32 arguments."""
    args: list[Value] = []
    for arg in block.args:
      if _is_complex(arg):
        pair = (Value(_f32(arg.type)), Value(_f32(arg.type)))
        self.pairs[arg] = pair
        args.extend(pair)
      else:
        args.append(arg)
    block.args = args

  # --- walking -------------------------------------------------------------------------------

  def block(self, block: Block, new_ops: list[Op] | None = None) -> None:
    new_ops = [] if new_ops is None else new_ops
    for op in block.ops:
      involved = any(_is_complex(v) for v in op.operands + op.results)
      if not involved:
        op.operands = [self.value(v) for v in op.operands]
        if op.name in CONTROL_FLOW:
          for region in op.regions:
            self.block(region.block)
        new_ops.append(op)
        continue
      results = self.rewrite(op, Emitter(op, new_ops))
      for old, new in zip(op.results, results):
        if isinstance(new, tuple):
          self.pairs[old] = new
        else:
          self.replaced[old] = new
    block.ops = new_ops

  def rewrite(self, op: Op, e: Emitter) -> list:
    """The new values of op's results: a pair for each complex one, a value otherwise."""
    name = op.name
    m = PairMath(e)
    if name == "stablehlo.constant":
      self.constants[op.result] = op.attrs["value"]
      re, im = _split_constant(op.attrs["value"])
      return [tuple(e.emit(name, [], op.result.shape, F32, {"value": part})
                    for part in (re, im))]
    if name == "stablehlo.complex":
      return [(self.value(op.operands[0]), self.value(op.operands[1]))]
    if name in ("stablehlo.real", "stablehlo.imag"):
      return [self.pairs[op.operands[0]][name == "stablehlo.imag"]]
    if name == "stablehlo.convert":
      return [self.convert(op, e)]
    if name == "stablehlo.iota":
      shape = op.result.shape
      return [(e.emit(name, [], shape, F32, dict(op.attrs)), e.splat(0.0, F32, shape))]
    if name in _UNARY:
      return [getattr(m, _UNARY[name])(self.pairs[op.operands[0]])]
    if name in _BINARY:
      return [getattr(m, _BINARY[name])(*(self.pairs[v] for v in op.operands))]
    if name == "stablehlo.compare":
      return [self.compare(op, m)]
    if name in ("stablehlo.dot_general", "stablehlo.convolution"):
      return [self.bilinear(op, e)]
    if name == "stablehlo.fft":
      return complex_fft.lower_fft(op, e, self.parts(op.operands[0]))
    if name == "stablehlo.reduce" and _body_is(op, "stablehlo.multiply"):
      return [self.product(op, e, m)]
    if name == "stablehlo.reduce_window" and _body_is(op, "stablehlo.multiply"):
      return [self.cumulative_product(op, e, m)]
    if name == "stablehlo.sort":
      return self.sort(op, e)
    if name in _CARRIERS:
      return self.carry(op, e)
    if name in _COMPONENTWISE:
      return self.componentwise(op, e)
    raise _unsupported(op)

  # --- rules ---------------------------------------------------------------------------------

  def convert(self, op: Op, e: Emitter):
    operand, result = op.operands[0], op.result
    if _is_complex(operand) and _is_complex(result):
      return self.pairs[operand]
    if _is_complex(operand):  # complex → real: the real part, as XLA converts
      re = self.pairs[operand][0]
      return re if result.dtype == F32 else e.emit(op.name, [re], result.shape, result.dtype)
    x = self.value(operand)
    re = x if x.dtype == F32 else e.emit(op.name, [x], result.shape, F32)
    return re, e.splat(0.0, F32, result.shape)

  def compare(self, op: Op, m: PairMath) -> Value:
    direction = op.attrs["comparison_direction"]
    if direction not in ("EQ", "NE"):
      raise _unsupported(op, f"complex numbers are not ordered ({direction})")
    (a, b), (c, d) = (self.pairs[v] for v in op.operands)
    re, im = m.compare(direction, a, c), m.compare(direction, b, d)
    return m.both(re, im) if direction == "EQ" else m.either(re, im)

  def bilinear(self, op: Op, e: Emitter) -> Pair:
    """dot_general / convolution of (a + bi) and (c + di): (ac − bd, ad + bc)."""
    (a, b), (c, d) = (self.parts(v) for v in op.operands)
    shape = op.result.shape

    def product(x: Value, y: Value) -> Value:
      return e.emit(op.name, [x, y], shape, F32, dict(op.attrs))

    re, im = product(a, c), (product(a, d) if d is not None else None)
    if b is not None:
      im_b = product(b, c)
      im = im_b if im is None else e.binary("add", im, im_b)
      if d is not None:
        re = e.binary("subtract", re, product(b, d))
    return re, (im if im is not None else e.splat(0.0, F32, shape))

  def product(self, op: Op, e: Emitter, m: PairMath) -> Pair:
    """A multiply-reduce as a pairwise tree: the reduced dims moved last and flattened, then
    halved until one column is left; finally multiplied by the init value."""
    if len(op.operands) != 2:
      raise _unsupported(op, "a variadic multiply-reduce")
    x, init = self.pairs[op.operands[0]], self.pairs[op.operands[1]]
    reduced = sorted(int(d) for d in op.attrs["dimensions"])
    shape = op.operands[0].shape
    kept = [d for d in range(len(shape)) if d not in reduced]
    rows = math.prod(shape[d] for d in kept)
    n = math.prod(shape[d] for d in reduced)
    x = tuple(e.reshape(e.transpose(p, kept + reduced), (rows, n)) for p in x)
    while n > 1:
      half = n // 2
      lo = tuple(e.slice(p, [0, 0], [rows, half]) for p in x)
      hi = tuple(e.slice(p, [0, half], [rows, 2 * half]) for p in x)
      products = m.multiply(lo, hi)
      if n % 2:  # the odd column waits for the next level
        products = tuple(e.concatenate([p, e.slice(q, [0, 2 * half], [rows, n])], 1)
                         for p, q in zip(products, x))
      x, n = products, half + n % 2
    out_shape = op.result.shape
    broadcast_init = tuple(e.emit("stablehlo.broadcast_in_dim", [p], out_shape, F32,
                                  {"broadcast_dimensions": []}) for p in init)
    if n == 0:
      return broadcast_init
    return m.multiply(tuple(e.reshape(p, out_shape) for p in x), broadcast_init)

  def cumulative_product(self, op: Op, e: Emitter, m: PairMath) -> Pair:
    """jnp.cumprod's reduce_window (a window spanning one axis, padded on one side by the init
    value 1) as a Hillis–Steele scan: log2(n) steps of x · (x shifted by 1, 2, 4 … with 1s)."""
    x, rank = self.pairs[op.operands[0]], op.result.type.rank
    shape = op.result.shape
    window = [int(w) for w in op.attrs["window_dimensions"]]
    padding = np.asarray(op.attrs.get("padding", np.zeros((rank, 2)))).reshape(rank, 2).tolist()
    unit = [int(v) for k in ("window_strides", "base_dilations", "window_dilations")
            for v in op.attrs.get(k, [1] * rank)]
    init = self.constants.get(op.operands[1])
    axes = [d for d in range(rank) if window[d] != 1 or padding[d] != [0, 0]]
    if not axes and set(unit) == {1} and init is not None and np.all(init == 1):
      return x  # a window of one element (a cumulative product along a dim of size 1)
    axis = axes[0] if len(axes) == 1 else None
    n = shape[axis] if axis is not None else 0
    if (axis is None or set(unit) != {1} or init is None or not np.all(init == 1)
        or window[axis] != n or padding[axis] not in ([n - 1, 0], [0, n - 1])):
      raise _unsupported(op, "a multiply reduce_window other than a cumulative product")
    reverse = padding[axis] == [0, n - 1]
    step = 1
    while step < n:
      ones_shape = list(shape)
      ones_shape[axis] = step
      ones = (e.splat(1.0, F32, ones_shape), e.splat(0.0, F32, ones_shape))
      lo, hi = [0] * rank, list(shape)
      if reverse:
        lo[axis] = step
      else:
        hi[axis] = n - step
      parts = [e.slice(p, lo, hi) for p in x]
      shifted = tuple(e.concatenate([p, one] if reverse else [one, p], axis)
                      for p, one in zip(parts, ones))
      x = m.multiply(x, shifted)
      step *= 2
    return x

  def componentwise(self, op: Op, e: Emitter) -> list:
    bodies = [_f32_body(op, r) for r in op.regions]
    copies = []
    for k in (0, 1):
      operands = [self.pairs[v][k] if _is_complex(v) else self.value(v) for v in op.operands]
      regions = [Region(clone_block(b, {})) for b in bodies]
      copy = Op(op.name, operands, [_f32(r.type) for r in op.results], dict(op.attrs), regions,
                op.loc)
      e.new_ops.append(copy)
      copies.append(copy.results)
    # A real result (of a variadic reduce, say) is computed alike by both copies: take the first.
    return [(re, im) if _is_complex(r) else re
            for r, re, im in zip(op.results, copies[0], copies[1])]

  def sort(self, op: Op, e: Emitter) -> list:
    """Each complex operand sorts as its two parts; the comparator's (lhs, rhs) arguments of
    that operand become (lhs re, rhs re, lhs im, rhs im), so JAX's complex comparator (a
    lexicographic compare of real, then imaginary parts) reads as its two-key float form."""
    block = op.regions[0].block
    args: list[Value] = []
    for k, v in enumerate(op.operands):
      lhs, rhs = block.args[2 * k], block.args[2 * k + 1]
      if not _is_complex(v):
        args.extend((lhs, rhs))
        continue
      (lr, li), (rr, ri) = ((Value(_f32(a.type)), Value(_f32(a.type))) for a in (lhs, rhs))
      self.pairs[lhs], self.pairs[rhs] = (lr, li), (rr, ri)
      args.extend((lr, rr, li, ri))
    block.args = args
    self.block(block)
    return self.rebuilt(op, e)

  def carry(self, op: Op, e: Emitter) -> list:
    """Control flow, barriers and region terminators with each complex value as two."""
    for region in op.regions:
      self.split_args(region.block)
      self.block(region.block)
    return self.rebuilt(op, e)

  def rebuilt(self, op: Op, e: Emitter) -> list:
    """op with its operands and results flattened (its regions as they now are)."""
    flat_types = []
    for r in op.results:
      flat_types.extend([_f32(r.type)] * (2 if _is_complex(r) else 1))
    new = Op(op.name, self.flat(op.operands), flat_types, dict(op.attrs), op.regions, op.loc)
    e.new_ops.append(new)
    values, it = [], iter(new.results)
    for r in op.results:
      values.append((next(it), next(it)) if _is_complex(r) else next(it))
    return values


def _body_is(op: Op, name: str) -> bool:
  """Whether op's single body applies `name` to its two arguments and returns the result."""
  if len(op.regions) != 1:
    return False
  block = op.regions[0].block
  return (len(block.ops) == 2 and block.ops[0].name == name
          and block.ops[0].operands == block.args[:2]
          and block.terminator.operands == [block.ops[0].result])


def _f32_body(op: Op, region: Region) -> Block:
  """A reduce / scatter body of linear ops, rebuilt with float32 where it had complex64."""
  block = region.block
  if not all(o.name in _LINEAR_BODY and not o.regions for o in block.ops):
    names = sorted({o.name for o in block.ops[:-1]})
    raise _unsupported(op, f"a body computing {', '.join(names) or 'nothing'} on complex "
                           "values (only add, subtract, or a plain update)")
  mapping: dict[Value, Value] = {a: Value(_f32(a.type)) for a in block.args}
  ops = []
  for o in block.ops:
    new = Op(o.name, [mapping.get(v, v) for v in o.operands], [_f32(r.type) for r in o.results],
             dict(o.attrs), loc=o.loc)
    mapping.update(zip(o.results, new.results))
    ops.append(new)
  return Block([mapping[a] for a in block.args], ops)


def _pack(e: Emitter, pair: Pair) -> Value:
  """A complex result's parts as f32 [..., 2]: the layout of its complex64 buffer."""
  shape = pair[0].shape
  return e.concatenate([e.reshape(p, shape + (1,)) for p in pair], len(shape))


def _unpack(e: Emitter, pairs: Value) -> Pair:
  """An f32 [..., 2] complex64 buffer's parts."""
  shape = pairs.shape[:-1]
  rank = len(shape)
  return tuple(e.reshape(e.slice(pairs, [0] * rank + [k], list(shape) + [k + 1]), shape)
               for k in (0, 1))


def run(module: Module) -> None:
  main = module.main
  body = main.body
  terminator = body.terminator
  if not _has_complex(body):
    return
  d = _Decomposer()
  prelude: list[Op] = []
  args = []
  for i, arg in enumerate(body.args):
    if not _is_complex(arg):
      args.append(arg)
      continue
    pairs = Value(TensorType(arg.shape + (2,), F32))
    d.pairs[arg] = _unpack(Emitter(terminator, prelude), pairs)
    main.complex_args.add(i)
    args.append(pairs)
  body.args = args
  body.ops = body.ops[:-1]
  d.block(body, prelude)
  returned = []
  for i, v in enumerate(terminator.operands):
    if _is_complex(v):
      returned.append(_pack(Emitter(terminator, body.ops), d.pairs[v]))
      main.complex_results.add(i)
    else:
      returned.append(d.value(v))
  terminator.operands = returned
  body.ops.append(terminator)
  main.result_types = [v.type for v in returned]
  replace_uses(body, d.replaced)


def _has_complex(block: Block) -> bool:
  return any(_is_complex(v) for v in block.args) or any(
      _is_complex(v) for op in walk_ops(block)
      for v in (*op.operands, *op.results, *(a for r in op.regions for a in r.block.args)))
