"""Compiles a StableHLO region (a reduce, reduce_window or scatter body, a sort comparator) into
the region-program words the gp_region_* instructions interpret (docs/program-format.md,
"Region programs").

A region program is a list of typed steps over registers: registers 0..args-1 are the region's
arguments (in the order the instruction passes them, `arg_registers`), step i writes register
args + i, and each step is an ALU op (arithmetic, compare, select, clamp, bitwise, shifts, min/
max, the float functions, convert as ALU copy to another dtype), a constant, or a bitcast
between dtypes of one width. The simulator rounds every step to its dtype, as XLA's CPU emitter
computes each op in its own type, so a body gives bit-for-bit the CPU backend's values when
the instruction folds in XLA's order. A float compare with compare_type TOTALORDER is
expand-total-order-compare's integer key compare, emitted here step by step. Anything else a
region holds (a nested region, a non-scalar value, an op the ALU has no step for) is refused
with the op's name.
"""

from __future__ import annotations

import dataclasses
import struct

import numpy as np

from hlo_lowering.ir import Op, Value
from hlo_lowering.lowering.elementwise import BINARY, COMPARE, TERNARY, UNARY
from hlo_lowering.lowering.gpsimd.comparators import unrecognised_region
from hlo_lowering.passes.expansion import SIGNED_OF
from hlo_lowering.program import Alu, DType
from hlo_lowering.program.enums import REGION_BITCAST, REGION_CONSTANT

# Ops that pass a scalar through unchanged (the importer or JAX's tracing leaves them in bodies).
_IDENTITY = frozenset({"stablehlo.reshape", "stablehlo.broadcast_in_dim", "stablehlo.optimization_barrier"})


@dataclasses.dataclass(frozen=True)
class RegionProgram:
  words: tuple[int, ...]  # the instruction's region operand
  steps: int


def _constant_bits(dtype: DType, value) -> int:
  """A constant step's word: a float's value as the bits of a double, an integer's value (u64
  as its two's-complement bit pattern)."""
  if dtype.is_float:
    return struct.unpack("<q", struct.pack("<d", float(value)))[0]
  value = int(value)
  return value - (1 << 64) if value >= 1 << 63 else value


class _Compiler:
  def __init__(self, op: Op, arg_dtypes: list[DType], outer_splat):
    self.op = op
    self.outer_splat = outer_splat
    self.args = len(arg_dtypes)
    self.arg_dtypes = arg_dtypes
    self.steps: list[tuple[int, int, int, int, int]] = []
    self.registers: dict[Value, int] = {}
    self.constants: dict[tuple, int] = {}
    self.keys: dict[int, int] = {}  # register -> its total-order key's register

  def refuse(self, what: str):
    return unrecognised_region(self.op, f"its region {what}, which region programs do not "
                                        "interpret")

  def emit(self, code: int, dtype: DType, a: int = -1, b: int = -1, c: int = -1) -> int:
    self.steps.append((int(code), int(dtype), a, b, c))
    return self.args + len(self.steps) - 1

  def constant(self, dtype: DType, value) -> int:
    bits = _constant_bits(dtype, value)
    key = (dtype, bits)
    if key not in self.constants:
      self.constants[key] = self.emit(REGION_CONSTANT, dtype, bits)
    return self.constants[key]

  def register(self, value: Value) -> int:
    if value in self.registers:
      return self.registers[value]
    splat = self.outer_splat(value) if self.outer_splat else None
    if splat is None:
      raise self.refuse("reads a value computed outside it at run time")
    return self.constant(value.dtype, np.asarray(splat).reshape(-1)[0])

  def total_order_key(self, x: int, dtype: DType) -> int:
    """expand-total-order-compare's key: the bits as a signed integer x, x ^ ((x >> bits-1) &
    INT_MAX)."""
    if x in self.keys:
      return self.keys[x]
    register = x
    itype = SIGNED_OF[dtype]
    bits = itype.itemsize * 8
    x = self.emit(REGION_BITCAST, itype, x)
    sign = self.emit(Alu.SHIFT_RIGHT_ARITHMETIC, itype, x, self.constant(itype, bits - 1))
    mask = self.emit(Alu.AND, itype, sign, self.constant(itype, (1 << (bits - 1)) - 1))
    self.keys[register] = self.emit(Alu.XOR, itype, x, mask)
    return self.keys[register]

  def step(self, inner: Op) -> int:
    name = inner.name
    result = inner.results[0]
    dtype = result.dtype
    if name == "stablehlo.constant":
      values = np.asarray(inner.attrs["value"]).reshape(-1)
      return self.constant(dtype, values[0])
    operands = [self.register(v) for v in inner.operands]
    if name in _IDENTITY:
      return operands[0]
    if name == "stablehlo.convert" and dtype == DType.PRED:  # nonzero is true
      zero = self.constant(inner.operands[0].dtype, 0)
      return self.emit(Alu.NE, DType.PRED, operands[0], zero)
    if name == "stablehlo.convert":
      return self.emit(Alu.COPY, dtype, operands[0])
    if name == "stablehlo.bitcast_convert":
      if inner.operands[0].dtype.itemsize != dtype.itemsize:
        raise self.refuse("bitcasts between dtypes of different widths")
      return self.emit(REGION_BITCAST, dtype, operands[0])
    if name == "stablehlo.compare":
      alu = COMPARE[inner.attrs["comparison_direction"]]
      source = inner.operands[0].dtype
      if inner.attrs.get("compare_type") == "TOTALORDER" and source.is_float:
        operands = [self.total_order_key(r, source) for r in operands]
      return self.emit(alu, DType.PRED, *operands)
    alu = UNARY.get(name) or BINARY.get(name) or TERNARY.get(name)
    if alu is None:
      raise self.refuse(f"holds {name}")
    data = inner.operands[1 if name in TERNARY else 0].dtype
    if (alu.is_float_only and not data.is_float) or (alu.is_integer_only and data.is_float):
      raise self.refuse(f"applies {name} to {data.name.lower()}")
    return self.emit(alu, dtype, *operands)

  def inline(self, block, arg_registers: list[int]) -> list[int]:
    """Steps for `block` with its arguments in `arg_registers`; the registers it returns."""
    for arg, register in zip(block.args, arg_registers):
      if arg.type.rank != 0 or arg.dtype == DType.C64:
        raise unrecognised_region(self.op, f"its region takes a {arg.dtype.name.lower()}"
                                           f"{list(arg.shape)} argument")
      self.registers[arg] = register
    for inner in block.ops[:-1]:
      if inner.regions or len(inner.results) != 1:
        raise self.refuse(f"holds {inner.name} with {len(inner.regions)} regions and "
                          f"{len(inner.results)} results")
      if inner.results[0].type.rank != 0:
        raise self.refuse(f"computes a {list(inner.results[0].shape)} value with {inner.name}")
      self.registers[inner.results[0]] = self.step(inner)
    returned = block.ops[-1]
    if returned.name != "stablehlo.return":
      raise self.refuse(f"ends with {returned.name}")
    return [self.register(v) for v in returned.operands]

  def program(self, results: list[int]) -> RegionProgram:
    words = [self.args, len(results), len(self.steps), *(int(d) for d in self.arg_dtypes),
             *results, *(w for s in self.steps for w in s)]
    return RegionProgram(tuple(words), len(self.steps))


def compile_region(op: Op, region_index: int = 0, arg_registers: list[int] | None = None,
                   outer_splat=None) -> RegionProgram:
  """The region program of `op`'s region `region_index`. Block argument j becomes register
  arg_registers[j] (default: j); `outer_splat(value)` gives the compile-time value of a value
  defined outside the region (the importer hoists constants out of bodies), or None."""
  block = op.regions[region_index].block
  order = list(arg_registers) if arg_registers is not None else list(range(len(block.args)))
  dtypes = [DType.PRED] * len(order)
  for arg, register in zip(block.args, order):
    dtypes[register] = arg.dtype
  compiler = _Compiler(op, dtypes, outer_splat)
  return compiler.program(compiler.inline(block, order))


def compile_select_fold(op: Op, index_dtype: DType, outer_splat=None) -> RegionProgram:
  """select_and_scatter's selection as a fold over (value, flat index) pairs: arguments (picked
  value, picked index, candidate value, candidate index); an index of -1 means nothing is picked
  yet, so the first candidate is taken; after that the pick stays while select(picked,
  candidate) holds (the op's select region, region 0)."""
  block = op.regions[0].block
  value = block.args[0].dtype
  compiler = _Compiler(op, [value, index_dtype, value, index_dtype], outer_splat)
  (selects,) = compiler.inline(block, [0, 2])
  picked = compiler.emit(Alu.NE, DType.PRED, 1, compiler.constant(index_dtype, -1))
  keep = compiler.emit(Alu.AND, DType.PRED, picked, selects)
  return compiler.program([compiler.emit(Alu.SELECT, value, keep, 0, 2),
                           compiler.emit(Alu.SELECT, index_dtype, keep, 1, 3)])
