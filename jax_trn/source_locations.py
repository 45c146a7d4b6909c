"""A cached program served to a request that differs only in source locations gets the request's.

The compile cache keys on the module without its locations (hlo_lowering.module_identity), so a
program compiled for one script also serves the same function from another script, or from the
same script after an edit shifted its lines. What the program says about source lines must then
be the request's, not the first compile's: its debug table (the loader's error messages, the
profiler, `jax-trn disasm`), its source text (Executable_OptimizedProgram) and the compile
report's op locations.

Both modules are the same ops in the same order, so the i-th op location of one corresponds to the
i-th of the other. Every location the compiler writes is an op's (a fused or decomposed op keeps the
location of the op it came from), so mapping old → new by position covers all of them. When that
map is not a function (one stored location corresponds to two different request locations, which
the compiler's one-frame summary of a call stack can cause), nothing is guessed: the caller
compiles afresh. So it does when the loader refuses the stored program (its debug table cannot be
read).
"""

from __future__ import annotations

import dataclasses

from hlo_lowering.program import writer
from hlo_lowering.program.instructions import DebugEntry
from hlo_lowering.report import CompileReport
from jax_trn import _native
from jax_trn.compile_cache import Entry

Location = tuple[str, str]  # (JAX name, "file:line:col"), as a debug entry holds it


def _location_map(stored, requested) -> dict[Location, Location] | None:
  if len(stored) != len(requested):
    return None
  mapping: dict[Location, Location] = {}
  for old, new in zip(stored, requested):
    if mapping.setdefault(old, new) != new:
      return None
  return mapping


def reattach(entry: Entry, locations: tuple[Location, ...],
             source: str | None) -> tuple[bytes, CompileReport] | None:
  """(program, report) of `entry` carrying the request's `locations` (its ops' locations in walk
  order) and `source` text (None: the stored one, as a multi-core program's is its partitioned
  signature, which JAX reads the output shardings from, not the request's module); None when the
  locations do not map one to one."""
  if entry.locations == locations:
    return entry.program, entry.report
  mapping = _location_map(entry.locations, locations)
  if mapping is None:
    return None
  try:
    info = _native.program_info(entry.program)
  except Exception:  # noqa: BLE001 — a program the loader refuses is compiled afresh
    return None

  def moved(name: str, position: str) -> Location:
    return mapping.get((name, position), (name, position))

  debug = []
  for op, name, position, lowering, rule in info["debug"]:
    name, position = moved(name, position)
    debug.append(DebugEntry(op=op, name=name, location=position, lowering=lowering, rule=rule))
  program = writer.replace_debug_info(entry.program, info["debug_offset"], debug,
                                      info["source"] if source is None else source)
  ops = []
  for op in entry.report.ops:
    name, position = moved(op.name, op.location)
    ops.append(dataclasses.replace(op, name=name, location=position))
  return program, dataclasses.replace(entry.report, ops=ops)
