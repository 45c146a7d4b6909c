"""Compile-time evaluation of small ops whose operands are all constants (numpy).

Used by canonicalize (fold small integer/shape computations) and unroll-static-loops (evaluate a
while loop's condition). Only ops whose numpy result is bit-identical to the device's are folded:
integer and boolean arithmetic (wrapping), compares, select, identity converts, and shape ops
of any dtype. Float
arithmetic is left to the device so rounding is never a question.
"""

from __future__ import annotations

import numpy as np

from hlo_lowering.ir import Op

MAX_FOLDED_ELEMENTS = 4096

_INT_BINARY = {
    "stablehlo.add": np.add, "stablehlo.subtract": np.subtract, "stablehlo.multiply": np.multiply,
    "stablehlo.and": np.bitwise_and, "stablehlo.or": np.bitwise_or,
    "stablehlo.xor": np.bitwise_xor, "stablehlo.maximum": np.maximum,
    "stablehlo.minimum": np.minimum,
}
_COMPARE = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
            "GT": np.greater, "GE": np.greater_equal}


def _is_int(array: np.ndarray) -> bool:
  return array.dtype.kind in "iub"


def _evaluate(op: Op, args: list[np.ndarray]):
  name, attrs = op.name, op.attrs
  out_dtype = op.results[0].dtype.numpy if op.results else None
  if name in _INT_BINARY and all(_is_int(a) for a in args):
    if args[0].dtype == np.bool_ and name in ("stablehlo.add", "stablehlo.multiply"):
      return None
    with np.errstate(over="ignore"):
      return _INT_BINARY[name](args[0], args[1]).astype(out_dtype)
  if name == "stablehlo.negate" and _is_int(args[0]) and args[0].dtype != np.bool_:
    with np.errstate(over="ignore"):
      return np.negative(args[0])
  if name == "stablehlo.not" and _is_int(args[0]):
    return np.logical_not(args[0]) if args[0].dtype == np.bool_ else np.invert(args[0])
  if name == "stablehlo.compare" and _is_int(args[0]):
    return _COMPARE[attrs["comparison_direction"]](args[0], args[1])
  if name == "stablehlo.select":
    return np.where(args[0], args[1], args[2]).astype(out_dtype)
  if name == "stablehlo.convert" and args[0].dtype == out_dtype:  # identity: any dtype
    return args[0]
  if name == "stablehlo.convert" and _is_int(args[0]) and np.dtype(out_dtype).kind in "iu":
    return args[0].astype(out_dtype)
  if name == "stablehlo.reshape":
    return args[0].reshape(op.results[0].shape)
  if name == "stablehlo.broadcast_in_dim":
    shape = op.results[0].shape
    expanded = [1] * len(shape)
    for i, d in enumerate(attrs["broadcast_dimensions"]):
      expanded[d] = args[0].shape[i]
    return np.broadcast_to(args[0].reshape(expanded), shape)
  if name == "stablehlo.slice":
    index = tuple(slice(s, l, st) for s, l, st in
                  zip(attrs["start_indices"], attrs["limit_indices"], attrs["strides"]))
    return args[0][index]
  if name == "stablehlo.concatenate":
    return np.concatenate(args, axis=attrs["dimension"])
  if name == "stablehlo.transpose":
    return np.transpose(args[0], attrs["permutation"])
  return None


def fold(op: Op, args: list[np.ndarray]) -> np.ndarray | None:
  """The value of single-result `op` given its operands' values, or None if not foldable."""
  if len(op.results) != 1 or op.regions or op.result.type.size > MAX_FOLDED_ELEMENTS:
    return None
  result = _evaluate(op, args)
  if result is None:
    return None
  result = np.asarray(result, dtype=op.result.dtype.numpy)
  if result.shape != op.result.shape:
    return None
  return result


def constant_op(array: np.ndarray, replaced: Op) -> Op:
  """A stablehlo.constant holding `array` that takes over `replaced`'s result value (so its
  uses need no rewriting) and location."""
  folded = Op("stablehlo.constant", [], [], {"value": array}, loc=replaced.loc)
  folded.results = list(replaced.results)
  return folded
