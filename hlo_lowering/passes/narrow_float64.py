"""narrow-float64: float64 computed as float32, where the program's source asks for it
(NeuronCores have no float64). Two scopes:

- **torch_xla's Python numbers** (programs imported from an HloModuleProto, torch_xla's format;
  `Module.source_format == "hlo"`). torch_xla uploads each Python number (an optimizer's lr and
  betas, addcmul/addcdiv's `value=`, the 0.5 of `x > 0.5` or `masked_fill(m, 0.5)`) as an f64[]
  argument, and to combine an f32 tensor with it in f64 it converts the tensor to f64 (`x > 0.5`
  compares in f64). torch_xla narrows the same way itself for PJRT_DEVICE=NEURON, in its
  MaybeDowncastToXlaDeviceType. Narrowed to f32: a rank-0 f64 argument of the entry function (it
  stays f64 in the signature: its buffer holds the number's 8 bytes; one convert to f32 at the
  top of the body takes its uses, a DMA that rounds to nearest even); an f64 constant holding
  one value (a scalar or a splat); a convert to f64 (dropped when its operand is f32); any op
  without regions whose f64 operands are all narrowed (none: iota). Refused with
  check-supported's float64 message, naming the op: a rank ≥ 1 f64 argument (a `.double()`
  tensor), an f64 constant of several values, a bitcast_convert to f64, an op with regions on
  f64 values, an f64 program result.
- **Every float64, by the user's choice** (`TRN_FLOAT64=float32` or
  `jax_trn.configure(float64="float32")`: the client then accepts f64 buffers of any rank and the
  compile service sets the module attribute `trn.float64 = "float32"`; docs/numerics.md,
  "float64 as float32"). Every f64 argument stays f64 in the signature and is loaded once as f32
  (one DMA, round to nearest even); every f64 result is computed in f32 and widened exactly into
  its f64 buffer at the end; every other f64 value, in any region (reduce, sort, scatter, while
  and case bodies), becomes f32; f64 constants are their values rounded to f32 (a value beyond
  f32's range becomes ±inf, as a convert would make it); a bitcast_convert between f64 and a
  64-bit integer keeps its meaning for the value held (float64_bits: bits → the nearest f32,
  f32 → the bits of its exact widening). Refused, naming the op: a bitcast between f64 and
  integers of another width.

Requires: calls inlined (inline-calls).
Ensures: the only f64 values left are entry arguments, each read once by a stablehlo.convert to
f32, and (every-float64 scope) results of a convert from f32 that the return reads; no convert
is from a type to itself. A program from JAX without `trn.float64 = "float32"` is unchanged.
Runs after: inline-calls (so values passed to private functions are in the entry function).
"""

from __future__ import annotations

import numpy as np

from hlo_lowering.errors import CompileError, UNIMPLEMENTED
from hlo_lowering.ir import (UNKNOWN_LOCATION, Module, Op, TensorType, Value, replace_uses,
                             walk_ops)
from hlo_lowering.passes import float64_bits
from hlo_lowering.passes.expansion import Emitter, every_block, expand_ops
from hlo_lowering.program import DType

F64, F32 = DType.F64, DType.F32

# Said to JAX and PyTorch (torch_xla) users alike.
FLOAT64_HINT = ("NeuronCores have no float64 type: use float32 (in JAX: leave jax_enable_x64 off, "
                "or set TRN_FLOAT64=float32 to compute float64 as float32; in PyTorch: .float())")


_TENSOR = ("a float64 tensor; only Python numbers, which torch_xla passes as float64 scalars, "
           "run as float32")


def _refusal(op: Op, why: str) -> CompileError:
  return CompileError(f"{op.describe()} uses float64 ({why}): {FLOAT64_HINT}", UNIMPLEMENTED)


def _is_single_value(op: Op) -> bool:
  value = op.attrs["value"]
  return value.size == 1 or (value.size > 0 and bool(np.all(value == value.flat[0])))


def _narrowed_values(module: Module, loads: set[Op]) -> set[Value]:
  """Every f64 value of the entry function that becomes f32 (the scalar arguments' loads
  stay); CompileError for any other."""
  narrowed: set[Value] = set()
  for op in walk_ops(module.main.body):
    if op in loads:
      continue
    f64_operands = [v for v in op.operands if v.dtype == F64]
    f64_results = [v for v in op.results if v.dtype == F64]
    if not f64_results:
      if any(v not in narrowed for v in f64_operands):
        raise _refusal(op, _TENSOR)
      continue
    if op.regions:
      raise _refusal(op, "an op with regions computes in float64")
    if op.name == "stablehlo.constant" and not _is_single_value(op):
      raise _refusal(op, "a constant of several float64 values")
    if op.name == "stablehlo.bitcast_convert":
      raise _refusal(op, "float64 bits")
    if op.name != "stablehlo.convert" and any(v not in narrowed for v in f64_operands):
      raise _refusal(op, _TENSOR)
    narrowed.update(f64_results)
  return narrowed


def _retype(module: Module, narrowed: set[Value]) -> None:
  for value in narrowed:
    value.type = TensorType(value.shape, F32)
  for op in walk_ops(module.main.body):
    if op.name == "stablehlo.constant" and op.result in narrowed:
      value = op.attrs["value"]
      if _is_single_value(op):  # kept a zero-stride splat, as the importer makes it
        op.attrs["value"] = np.broadcast_to(np.float32(value.flat[0]), value.shape)
      else:
        with np.errstate(over="ignore"):  # beyond f32's range: ±inf, as a convert makes it
          op.attrs["value"] = value.astype(np.float32)


def _drop_identity_converts(module: Module) -> None:
  """A convert from a type to itself (f32 → f32 once narrowed) is its operand."""
  body = module.main.body
  for block in [body] + [r.block for op in walk_ops(body) for r in op.regions]:
    identity = {op.result: op.operands[0] for op in block.ops
                if op.name == "stablehlo.convert" and op.result.dtype == op.operands[0].dtype}
    for result, source in identity.items():  # a chain (f32 → f64 → f32) ends at its first value
      while source in identity:
        source = identity[source]
      identity[result] = source
    if identity:
      block.ops = [op for op in block.ops
                   if op.name != "stablehlo.convert" or op.result not in identity]
      replace_uses(body, identity)


def _load_arguments(module: Module, arguments: list[Value]) -> set[Op]:
  """One convert to f32 at the top of the body per f64 argument, taking all its uses; each has
  the location of the argument's first use (arguments have none)."""
  main = module.main
  first_use = {}
  for op in walk_ops(main.body):
    for v in op.operands:
      first_use.setdefault(v, op.loc)
  loads = {arg: Op("stablehlo.convert", [arg], [TensorType(arg.shape, F32)],
                   loc=first_use.get(arg, UNKNOWN_LOCATION)) for arg in arguments}
  replace_uses(main.body, {arg: load.result for arg, load in loads.items()})
  main.body.ops[:0] = list(loads.values())
  return set(loads.values())


def _narrow_python_numbers(module: Module) -> None:
  main = module.main
  for i, result_type in enumerate(main.result_types):
    if result_type.dtype == F64:
      raise CompileError(f"result {i} of the program is float64 {list(result_type.shape)}: "
                         f"{FLOAT64_HINT}", UNIMPLEMENTED)
  loads = _load_arguments(module, [a for a in main.args if a.dtype == F64 and a.type.rank == 0])
  _retype(module, _narrowed_values(module, loads))
  _drop_identity_converts(module)


def _float64_bits(op: Op, e: Emitter) -> list[Value] | None:
  """A bitcast between f64 and a 64-bit integer, as float64_bits defines it for values held as
  f32 (run before the retyping: `op`'s f64 side is still typed f64)."""
  if op.name != "stablehlo.bitcast_convert":
    return None
  source, target = op.operands[0], op.result
  if F64 not in (source.dtype, target.dtype):
    return None
  if source.shape != target.shape or {source.dtype, target.dtype} - {F64, DType.U64, DType.S64}:
    raise CompileError(f"{op.describe()} reinterprets float64 bits as other than one 64-bit "
                       f"integer each (TRN_FLOAT64=float32 computes float64 as float32; only "
                       f"f64 ⇄ u64/s64 bitcasts keep a meaning): {FLOAT64_HINT}", UNIMPLEMENTED)
  if target.dtype == F64:
    return [float64_bits.float32_of_float64_bits(e, source)]
  return [float64_bits.float64_bits_of_float32(e, source, target.dtype)]


def _narrow_every_float64(module: Module) -> None:
  main = module.main
  expand_ops(module, _float64_bits, blocks=every_block)
  loads = _load_arguments(module, [a for a in main.args if a.dtype == F64])
  narrowed: set[Value] = set()
  for op in walk_ops(main.body):
    if op in loads:
      continue
    narrowed.update(v for v in op.results if v.dtype == F64)
    narrowed.update(a for r in op.regions for a in r.block.args if a.dtype == F64)
  _retype(module, narrowed)
  _drop_identity_converts(module)
  if loads or narrowed:
    module.attrs[NARROWED_ATTR] = True
  # Each f64 result: its f32 value widened (exactly) into the caller's f64 buffer.
  terminator = main.body.terminator
  for i, result_type in enumerate(main.result_types):
    if result_type.dtype == F64:
      widen = Op("stablehlo.convert", [terminator.operands[i]], [result_type],
                 loc=terminator.loc)
      main.body.ops.insert(len(main.body.ops) - 1, widen)
      terminator.operands[i] = widen.result


# The module attribute by which the compile service asks for every float64 as float32, and the
# one this pass sets when it narrowed any (the compile report says so, and the service warns).
FLOAT64_ATTR = "trn.float64"
NARROWED_ATTR = "trn.float64_narrowed"


def narrows_every_float64(module: Module) -> bool:
  return module.attrs.get(FLOAT64_ATTR) == "float32"


def float64_boundary(module: Module) -> set[Value]:
  """The f64 values a program keeps once narrowed: the arguments only a convert to f32 reads
  (torch_xla's Python numbers: rank-0 ones of a program from an HloModuleProto), and with every
  float64 narrowed the values the return reads (converts from f32)."""
  main = module.main
  if narrows_every_float64(module):
    return ({a for a in main.args if a.dtype == F64}
            | {v for v in main.returned if v.dtype == F64})
  if module.source_format != "hlo":
    return set()
  return {a for a in main.args if a.dtype == F64 and a.type.rank == 0}


def run(module: Module) -> None:
  if narrows_every_float64(module):
    _narrow_every_float64(module)
  elif module.source_format == "hlo":
    _narrow_python_numbers(module)
