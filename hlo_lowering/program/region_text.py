"""Readable text of a region program (docs/program-format.md, "Region programs") for the
disassembly: `(r0:f32, r1:f32) r2 = f32 0.5; r3 = mul.f32 r0, r2; ... -> r4`."""

from __future__ import annotations

import struct

from .enums import REGION_BITCAST, REGION_CONSTANT, Alu, DType


def _constant(dtype: DType, bits: int) -> str:
  if dtype.is_float:
    return repr(struct.unpack("<d", struct.pack("<q", bits))[0])
  return str(bits)


def format_region(words: list[int]) -> str:
  """The words as text; a malformed list (the loader would reject it) prints as the words."""
  try:
    args, results, steps = words[:3]
    dtypes = [DType(d) for d in words[3:3 + args]]
    returned = words[3 + args:3 + args + results]
    body = words[3 + args + results:]
    if len(body) != 5 * steps:
      raise ValueError("step count")
    parts = []
    for i in range(steps):
      code, dtype, a, b, c = body[5 * i:5 * i + 5]
      dtype = DType(dtype)
      name = dtype.name.lower()
      target = f"r{args + i}"
      if code == REGION_CONSTANT:
        parts.append(f"{target} = {name} {_constant(dtype, a)}")
      elif code == REGION_BITCAST:
        parts.append(f"{target} = bitcast.{name} r{a}")
      else:
        alu = Alu(code)
        operands = ", ".join(f"r{r}" for r in (a, b, c)[:alu.arity])
        parts.append(f"{target} = {alu.name.lower()}.{name} {operands}")
  except (ValueError, KeyError):
    return "[" + ", ".join(map(str, words)) + "]"
  signature = ", ".join(f"r{i}:{d.name.lower()}" for i, d in enumerate(dtypes))
  return (f"{{({signature}) " + "; ".join(parts) + " -> "
          + ", ".join(f"r{r}" for r in returned) + "}")
