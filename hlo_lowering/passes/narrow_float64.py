"""narrow-float64-scalars: in programs torch_xla sends, the float64 that Python numbers bring in
is computed in float32 (NeuronCores have no float64; torch_xla narrows the same way itself for
PJRT_DEVICE=NEURON, in its MaybeDowncastToXlaDeviceType).

torch_xla uploads each Python number (an optimizer's lr and betas, addcmul/addcdiv's `value=`,
the 0.5 of `x > 0.5` or `masked_fill(m, 0.5)`) as an f64[] argument, and to combine an f32
tensor with it in f64 it converts the tensor to f64 (`x > 0.5` compares in f64). Only programs
imported from an HloModuleProto (torch_xla's format; `Module.source_format == "hlo"`) are
touched: JAX's float64 stays check-supported's clear error.

Narrowed to f32 (docs/numerics.md, "float64 from PyTorch"):
- a rank-0 f64 argument of the entry function: it stays f64 in the signature (its buffer holds
  the number's 8 bytes) and one convert to f32 at the top of the body takes its uses (a DMA,
  which rounds to nearest even);
- an f64 constant holding one value (a scalar or a splat): that value rounded to f32;
- a convert to f64 from another type: a convert to f32 (dropped when its operand is f32);
- any op without regions whose f64 operands are all narrowed (none: iota): its f64 results.
Refused here with check-supported's float64 message, naming the op: an f64 value that is none of
these (a rank ≥ 1 f64 argument, i.e. a `.double()` tensor; an f64 constant of several values; a
bitcast_convert to f64; an op with regions on f64 values), and an f64 program result (the
caller's buffer would be f64).

Requires: calls inlined (inline-calls).
Ensures: in a program imported from an HloModuleProto, the only f64 values left are rank-0
arguments of the entry function, each used once, by a stablehlo.convert to f32; no convert is
from a type to itself; other programs are unchanged.
Runs after: inline-calls (so scalars passed to private functions are in the entry function).
"""

from __future__ import annotations

import numpy as np

from hlo_lowering.errors import CompileError, UNIMPLEMENTED
from hlo_lowering.ir import (UNKNOWN_LOCATION, Module, Op, TensorType, Value, replace_uses,
                             walk_ops)
from hlo_lowering.passes.check_supported import FLOAT64_HINT
from hlo_lowering.program import DType

F64, F32 = DType.F64, DType.F32


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
      value = op.attrs["value"]  # one value: kept a zero-stride splat, as the importer makes it
      op.attrs["value"] = np.broadcast_to(np.float32(value.flat[0]), value.shape)


def _drop_identity_converts(module: Module) -> None:
  """A convert from a type to itself (f32 → f32 once narrowed) is its operand."""
  body = module.main.body
  for block in [body] + [r.block for op in walk_ops(body) for r in op.regions]:
    identity = {op.result: op.operands[0] for op in block.ops
                if op.name == "stablehlo.convert" and op.result.dtype == op.operands[0].dtype}
    if identity:
      block.ops = [op for op in block.ops
                   if op.name != "stablehlo.convert" or op.result not in identity]
      replace_uses(body, identity)


def run(module: Module) -> None:
  if module.source_format != "hlo":
    return
  main = module.main
  for i, result_type in enumerate(main.result_types):
    if result_type.dtype == F64:
      raise CompileError(f"result {i} of the program is float64 {list(result_type.shape)}: "
                         f"{FLOAT64_HINT}", UNIMPLEMENTED)
  first_use = {}
  for op in walk_ops(main.body):
    for v in op.operands:
      first_use.setdefault(v, op.loc)
  # Each load has the location of the number's first use (arguments have none).
  loads = {arg: Op("stablehlo.convert", [arg], [TensorType((), F32)],
                   loc=first_use.get(arg, UNKNOWN_LOCATION))
           for arg in main.args if arg.dtype == F64 and arg.type.rank == 0}
  replace_uses(main.body, {arg: load.result for arg, load in loads.items()})
  main.body.ops[:0] = list(loads.values())
  narrowed = _narrowed_values(module, set(loads.values()))
  _retype(module, narrowed)
  _drop_identity_converts(module)
