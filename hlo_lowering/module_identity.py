"""What a program is, apart from where it came from: the module without its source locations.

The same function jitted from two scripts, or from one script after an edit above it, differs
only in locations (debug info: they name source lines, they never change what the program
computes). A compile cache keyed on `ModuleIdentity.canonical` serves one compiled program to
both, and re-attaches each request's own locations (`locations`, `source`) to it.
"""

from __future__ import annotations

import dataclasses

from jaxlib.mlir import ir

from hlo_lowering import importer
from hlo_lowering.locations import parse_location


@dataclasses.dataclass(frozen=True)
class ModuleIdentity:
  canonical: bytes  # the module as MLIR text without debug info
  # Every op's location as the compiler's debug entries carry it, (JAX name, "file:line:col"),
  # in walk order (pre-order, regions in order).
  locations: tuple[tuple[str, str], ...]
  source: str  # the module as MLIR text with its locations (the program's source field)


def identify(code: bytes, fmt: str) -> ModuleIdentity:
  """The identity of program bytes in either format; CompileError when they do not parse."""
  module, ctx = importer.parse(code, fmt)
  with ctx:
    raw = []

    def visit(op):
      raw.append(str(op.location))
      return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    # Ops of one source line share their location text: each distinct text is parsed once.
    parsed = {}
    for text in raw:
      if text not in parsed:
        loc = parse_location(text)
        parsed[text] = (loc.name, loc.position)
    return ModuleIdentity(
        canonical=module.operation.get_asm(enable_debug_info=False).encode(),
        locations=tuple(parsed[text] for text in raw),
        source=module.operation.get_asm(enable_debug_info=True))

