"""Recognises the regions JAX (and torch_xla) emit for argmax/argmin reductions and for sort
comparators.

Regions are matched against the exact patterns jax.lax emits (docs/program-format.md gives the
semantics the matched instruction implements); arbitrary regions are not interpreted, and a
region that matches nothing is reported with `unrecognised_region`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hlo_lowering.errors import CompileError, UNIMPLEMENTED
from hlo_lowering.ir import Op


def unrecognised_region(op: Op, what: str) -> CompileError:
  where = op.loc.position or "an unknown source line"
  name = f" ({op.loc.name})" if op.loc.name else ""
  types = ", ".join(f"{v.dtype.name.lower()}{list(v.shape)}" for v in op.operands)
  return CompileError(f"{op.name} is not supported on NeuronCores: {what} (operands: {types}) "
                      f"at {where}{name}", UNIMPLEMENTED)


class _Block:
  """A region's single block with each value's defining op at hand."""

  def __init__(self, op: Op, outer_splat=None):
    self.block = op.regions[0].block if len(op.regions) == 1 else None
    self.outer_splat = outer_splat  # value -> its compile-time splat, for values from outside
    self.defs = {}
    if self.block is not None:
      for inner in self.block.ops:
        for result in inner.results:
          self.defs[result] = inner

  def returned(self) -> list:
    if self.block is None or not self.block.ops:
      return []
    last = self.block.ops[-1]
    return list(last.operands) if last.name == "stablehlo.return" else []

  def op(self, value, name: str) -> Op | None:
    inner = self.defs.get(value)
    return inner if inner is not None and inner.name == name else None

  def compare(self, value, *directions: str) -> Op | None:
    inner = self.op(value, "stablehlo.compare")
    if inner is None or inner.attrs.get("comparison_direction") not in directions:
      return None
    return inner

  def pair(self, value, name: str) -> tuple | None:
    """The two operands of a commutative `name` op defining value."""
    inner = self.op(value, name)
    return tuple(inner.operands) if inner is not None else None

  def splat(self, value):
    inner = self.op(value, "stablehlo.constant")
    if inner is None:
      outer = self.outer_splat(value) if self.outer_splat and value not in self.defs else None
      return None if outer is None else float(np.asarray(outer).astype(np.float64))
    values = np.asarray(inner.attrs["value"]).astype(np.float64).reshape(-1)
    if values.size == 0:
      return None
    same = np.isnan(values) if np.isnan(values[0]) else values == values[0]
    return values[0] if same.all() else None


def _same_operands(op: Op, a, b) -> bool:
  return list(op.operands) == [a, b]


# --- argmax / argmin ------------------------------------------------------------------------

def _arg_reduce_body(op: Op):
  """The parts both arg-reduce forms share: reduce(values, indices) whose body returns two
  selects. (block, (acc, acc_i, x, x_i), value select, index select), or None."""
  b = _Block(op)
  if b.block is None or len(op.operands) != 4 or len(b.block.args) != 4:
    return None
  returned = b.returned()
  if len(returned) != 2:
    return None
  value_select = b.op(returned[0], "stablehlo.select")
  index_select = b.op(returned[1], "stablehlo.select")
  if value_select is None or index_select is None:
    return None
  return b, tuple(b.block.args), value_select, index_select


def arg_reduce_kind(op: Op) -> str | None:
  """"max" or "min" when `op` is reduce(values, indices) with JAX's argmax/argmin body:

      keep  = or(compare GT|LT (acc, x), compare NE (acc, acc))
      index = or(keep, and(compare EQ (acc, x), compare LT (acc_i, x_i)))
      return select(keep, acc, x), select(index, acc_i, x_i)

  where (acc, acc_i) are the body's first two arguments.
  """
  body = _arg_reduce_body(op)
  if body is None:
    return None
  b, (acc, acc_i, x, x_i), value_select, index_select = body
  keep, on_true, on_false = value_select.operands
  if (on_true, on_false) != (acc, x) or list(index_select.operands[1:]) != [acc_i, x_i]:
    return None
  keep_terms = b.pair(keep, "stablehlo.or")
  if keep_terms is None:
    return None
  kind = None
  for first, second in (keep_terms, keep_terms[::-1]):
    better, nan = b.compare(first, "GT", "LT"), b.compare(second, "NE")
    if better and nan and _same_operands(better, acc, x) and _same_operands(nan, acc, acc):
      kind = "max" if better.attrs["comparison_direction"] == "GT" else "min"
  if kind is None:
    return None
  index_terms = b.pair(index_select.operands[0], "stablehlo.or")
  if index_terms is None or keep not in index_terms:
    return None
  tie = index_terms[1] if index_terms[0] == keep else index_terms[0]
  tie_terms = b.pair(tie, "stablehlo.and")
  if tie_terms is None:
    return None
  for first, second in (tie_terms, tie_terms[::-1]):
    equal, earlier = b.compare(first, "EQ"), b.compare(second, "LT")
    if equal and earlier and _same_operands(equal, acc, x) and _same_operands(earlier, acc_i, x_i):
      return kind
  return None


def select_arg_reduce_kind(op: Op) -> str | None:
  """"max" or "min" when `op` is reduce(values, indices) with XLA's select body, which torch_xla
  emits for argmax/argmin and max/min(dim):

      keep  = compare GE|LE (acc, x)
      index = select(compare EQ (acc, x), minimum(acc_i, x_i), select(keep, acc_i, x_i))
      return select(keep, acc, x), index

  where (acc, acc_i) are the body's first two arguments.
  """
  body = _arg_reduce_body(op)
  if body is None:
    return None
  b, (acc, acc_i, x, x_i), value_select, index_select = body
  keep, on_true, on_false = value_select.operands
  better = b.compare(keep, "GE", "LE")
  if (on_true, on_false) != (acc, x) or better is None or not _same_operands(better, acc, x):
    return None
  equal, smaller, chosen = index_select.operands
  equal = b.compare(equal, "EQ")
  smaller_terms = b.pair(smaller, "stablehlo.minimum")
  chosen = b.op(chosen, "stablehlo.select")
  if equal is None or not _same_operands(equal, acc, x) or smaller_terms is None or \
      set(smaller_terms) != {acc_i, x_i} or chosen is None or \
      list(chosen.operands) != [keep, acc_i, x_i]:
    return None
  return "max" if better.attrs["comparison_direction"] == "GE" else "min"


# --- sort comparators -----------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class SortOrder:
  num_keys: int
  descending: bool
  canonical_floats: bool  # JAX's -0.0 == 0.0, NaNs equal and last; else IEEE totalOrder


def _key_of(b: _Block, value, arg) -> str | None:
  """"raw" when value is arg; "canonical" when it is JAX's _canonicalize_float_for_sort(arg):
  select(ne(arg, arg), NaN, select(eq(arg, 0), 0, arg))."""
  if value == arg:
    return "raw"
  outer = b.op(value, "stablehlo.select")
  if outer is None:
    return None
  is_nan, nan, inner_value = outer.operands
  nan_test = b.compare(is_nan, "NE")
  nan_value = b.splat(nan)
  if nan_test is None or not _same_operands(nan_test, arg, arg) or nan_value is None or \
      not np.isnan(nan_value):
    return None
  inner = b.op(inner_value, "stablehlo.select")
  if inner is None:
    return None
  is_zero, zero, original = inner.operands
  zero_test = b.compare(is_zero, "EQ")
  if zero_test is None or original != arg or b.splat(zero) != 0 or \
      list(zero_test.operands)[0] != arg or b.splat(zero_test.operands[1]) != 0:
    return None
  return "canonical"


def _key_compare(b: _Block, compare: Op, args, direction_names):
  """(key number, descending, key form) of compare(key(x_k), key(y_k)) or of the swapped form."""
  if compare is None or compare.attrs.get("comparison_direction") not in direction_names:
    return None
  lhs, rhs = compare.operands
  for k in range(len(args) // 2):
    x, y = args[2 * k], args[2 * k + 1]
    for first, second, swapped in ((x, y, False), (y, x, True)):
      forms = {_key_of(b, lhs, first), _key_of(b, rhs, second)}
      if None in forms or len(forms) != 1:
        continue
      form = forms.pop()
      is_float = lhs.dtype.is_float
      if is_float and compare.attrs.get("compare_type") != "TOTALORDER":
        return None
      descending = (compare.attrs["comparison_direction"] == "GT") != swapped
      return k, descending, form if is_float else None
  return None


def sort_order(op: Op, outer_splat) -> SortOrder | None:
  """The order of a sort whose comparator is JAX's lexicographic one over the first keys:

      p_last = compare LT|GT (key(x_last), key(y_last))
      p_k    = or(compare LT|GT (key(x_k), key(y_k)), and(compare EQ (key(x_k), key(y_k)), p_k+1))

  with key() the identity (integers, or floats compared in TOTALORDER) or JAX's float
  canonicalisation, one direction and one float form for every key. Constants the comparator
  uses may be defined outside it (the importer hoists them): `outer_splat(value)` gives those."""
  b = _Block(op, outer_splat)
  args = b.block.args if b.block is not None else []
  returned = b.returned()
  if len(args) != 2 * len(op.operands) or len(returned) != 1:
    return None
  keys = []
  value = returned[0]
  while True:
    last = _key_compare(b, b.compare(value, "LT", "GT"), args, ("LT", "GT"))
    if last is not None:
      keys.append(last)
      break
    terms = b.pair(value, "stablehlo.or")
    if terms is None:
      return None
    step = None
    for first, second in (terms, terms[::-1]):
      key = _key_compare(b, b.compare(first, "LT", "GT"), args, ("LT", "GT"))
      tie = b.pair(second, "stablehlo.and")
      if key is None or tie is None:
        continue
      for equal, rest in (tie, tie[::-1]):
        same = _key_compare(b, b.compare(equal, "EQ"), args, ("EQ",))
        if same is not None and same[0] == key[0] and same[2] == key[2]:
          step = key, rest
    if step is None:
      return None
    keys.append(step[0])
    value = step[1]
  if [k for k, _, _ in keys] != list(range(len(keys))):
    return None
  if len({d for _, d, _ in keys}) != 1 or len({f for _, _, f in keys if f}) > 1:
    return None
  forms = {f for _, _, f in keys if f}
  return SortOrder(len(keys), keys[0][1], forms != {"raw"})
