"""Text form of the IR, for TRN_DUMP_IR dumps, pass tests and error messages.

One op per line: `%5 = stablehlo.add(%3, %4) {attrs} : tensor<4xf32>  // jit(f)/add at f.py:3:4`.
Value numbers are assigned in print order, so two prints of equal IR are equal text.
"""

from __future__ import annotations

import numpy as np

from hlo_lowering.ir import Block, Function, Module, Op, Value


class _Names:
  def __init__(self):
    self._ids: dict[Value, int] = {}

  def __call__(self, value: Value) -> str:
    if value not in self._ids:
      self._ids[value] = len(self._ids)
    return f"%{self._ids[value]}"


def _format_attr(value) -> str:
  if isinstance(value, np.ndarray):
    if value.size and value.strides.count(0) == value.ndim and value.ndim:
      return f"splat({value.flat[0]!r})"
    if value.size <= 8:
      return f"dense({value.tolist()!r})"
    return f"dense(<{value.size} elements>)"
  return repr(value)


def _format_op(op: Op, names: _Names, indent: str) -> list[str]:
  results = ", ".join(names(r) for r in op.results)
  operands = ", ".join(names(v) for v in op.operands)
  attrs = ""
  if op.attrs:
    attrs = " {" + ", ".join(f"{k} = {_format_attr(v)}" for k, v in sorted(op.attrs.items())) + "}"
  types = " : " + ", ".join(str(r.type) for r in op.results) if op.results else ""
  head = f"{results} = " if op.results else ""
  loc = f"  // {op.loc}" if op.loc.name or op.loc.file else ""
  lines = [f"{indent}{head}{op.name}({operands}){attrs}{types}{loc}"]
  for region in op.regions:
    lines.extend(_format_block(region.block, names, indent + "  "))
  return lines


def _format_block(block: Block, names: _Names, indent: str) -> list[str]:
  args = ", ".join(f"{names(a)}: {a.type}" for a in block.args)
  lines = [f"{indent}^({args}):"]
  for op in block.ops:
    lines.extend(_format_op(op, names, indent + "  "))
  return lines


def format_function(function: Function, names: _Names | None = None) -> str:
  names = names or _Names()
  visibility = "public" if function.public else "private"
  lines = [f"func {visibility} @{function.name}"]
  lines.extend(_format_block(function.body, names, "  "))
  return "\n".join(lines)


def format_module(module: Module) -> str:
  names = _Names()
  return "\n".join(format_function(f, names) for f in module.functions.values()) + "\n"
