"""The operators kernels name (`nl.add`, `nl.exp`, `nl.max`, ...): each maps to an ALU op of
the program format, or (a few activation functions the ScalarE table lacks) to a short
decomposition (isa.activation). Passed as `op=` to nki.isa instructions; called directly
(`nl.add(a, b)`, `nl.exp(x)`, `nl.max(x, axis=1)`) they are the legacy tile-returning
nki.language functions (language.py). NumPy's ufuncs are accepted where NKI accepts them.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hlo_lowering.program import Alu
from jax_trn.nki.errors import kernel_error

BINARY, UNARY, REDUCE = "binary", "unary", "reduce"
# Activation functions without an ALU op (relu, silu: decomposed by isa.activation).
SQUARE, RELU, SILU = "square", "relu", "silu"


@dataclasses.dataclass(frozen=True)
class Op:
  name: str
  alu: Alu | None       # None: a decomposed activation function
  kind: str             # BINARY | UNARY | REDUCE (how the legacy call behaves)

  def __call__(self, *args, **kwargs):
    return _legacy_call[0](self, *args, **kwargs)

  def __repr__(self) -> str:
    return f"nl.{self.name}"


# The legacy tile-returning call of an operator: language.apply, registered by language.py (which
# needs these operators itself).
_legacy_call = [None]


def set_legacy_call(fn) -> None:
  _legacy_call[0] = fn


def _ops(kind: str, table: dict) -> dict:
  return {name: Op(name, alu, kind) for name, alu in table.items()}


BINARY_OPS = _ops(BINARY, {
    "add": Alu.ADD, "subtract": Alu.SUB, "multiply": Alu.MUL, "divide": Alu.DIV,
    "maximum": Alu.MAX, "minimum": Alu.MIN, "power": Alu.POW, "equal": Alu.EQ,
    "not_equal": Alu.NE, "greater": Alu.GT, "greater_equal": Alu.GE, "less": Alu.LT,
    "less_equal": Alu.LE, "bitwise_and": Alu.AND, "bitwise_or": Alu.OR, "bitwise_xor": Alu.XOR,
    "left_shift": Alu.SHIFT_LEFT, "right_shift": Alu.SHIFT_RIGHT_ARITHMETIC,
    "logical_and": Alu.AND, "logical_or": Alu.OR, "logical_xor": Alu.XOR})
UNARY_OPS = _ops(UNARY, {
    "exp": Alu.EXP, "log": Alu.LOG, "tanh": Alu.TANH, "sigmoid": Alu.LOGISTIC,
    "sqrt": Alu.SQRT, "rsqrt": Alu.RSQRT, "reciprocal": Alu.RECIPROCAL, "abs": Alu.ABS,
    "negative": Alu.NEG, "sin": Alu.SIN, "cos": Alu.COS, "tan": Alu.TAN, "erf": Alu.ERF,
    "sign": Alu.SIGN, "floor": Alu.FLOOR, "ceil": Alu.CEIL, "copy": Alu.COPY,
    "identity": Alu.COPY, "invert": Alu.NOT, "bitwise_not": Alu.NOT, "logical_not": Alu.NOT,
    SQUARE: Alu.SQUARE, RELU: None, SILU: None})
REDUCE_OPS = _ops(REDUCE, {"max": Alu.MAX, "min": Alu.MIN, "sum": Alu.ADD, "prod": Alu.MUL})

_UFUNCS = {np.add: "add", np.subtract: "subtract", np.multiply: "multiply",
           np.divide: "divide", np.maximum: "maximum", np.minimum: "minimum",
           np.power: "power", np.exp: "exp", np.log: "log", np.tanh: "tanh", np.sqrt: "sqrt",
           np.abs: "abs", np.negative: "negative", np.sin: "sin", np.cos: "cos",
           np.equal: "equal", np.greater: "greater", np.less: "less", np.square: SQUARE,
           np.bitwise_and: "bitwise_and", np.bitwise_or: "bitwise_or",
           np.bitwise_xor: "bitwise_xor", np.max: "max", np.min: "min", np.sum: "sum"}


def resolve(op, what: str, kinds=(BINARY, UNARY, REDUCE)) -> Op:
  """`op` (an nl operator or a NumPy ufunc) as an Op of one of `kinds`."""
  if not isinstance(op, Op):
    name = _UFUNCS.get(op)
    table = {**BINARY_OPS, **UNARY_OPS, **REDUCE_OPS}
    if name is None:
      raise kernel_error(f"{what}: {op!r} is not an NKI operator")
    op = table[name]
  if op.kind not in kinds:
    raise kernel_error(f"{what}: {op!r} is a {op.kind} operator; expected {' or '.join(kinds)}")
  return op


def binary_alu(op, what: str) -> Alu:
  """The two-operand ALU op of `op` (reductions' max/min/sum count as their binary op)."""
  return resolve(op, what, (BINARY, REDUCE)).alu
