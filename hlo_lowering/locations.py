"""Source locations out of MLIR location text.

JAX writes `loc("jit(f)/dot_general"(callsite("f"("file.py":36:15 to :20) at "<module>"(...))))`:
a name wrapping a call stack, innermost frame first. We keep the name and the innermost frame
that is the user's code, not JAX's own (frames inside jax/, jaxlib/, flax/ or site-packages).
"""

from __future__ import annotations

import re

from hlo_lowering.ir import Location, UNKNOWN_LOCATION

_NAME = re.compile(r'^loc\("((?:[^"\\]|\\.)*)"')
_FRAME = re.compile(r'"((?:[^"\\]|\\.)*)":(\d+):(\d+)')
_LIBRARY_DIRS = ("site-packages", "dist-packages", "/jax/", "/jaxlib/", "/flax/", "/optax/")


def _is_library_file(path: str) -> bool:
  return any(part in path for part in _LIBRARY_DIRS)


def parse_location(text: str) -> Location:
  """A Location from `str(mlir_location)`; UNKNOWN_LOCATION for `loc(unknown)`."""
  name_match = _NAME.match(text)
  name = ""
  if name_match and not _FRAME.match(text[len("loc("):]):
    name = name_match.group(1)
  # The first frame that is the user's code, else the first frame at all; frames come innermost
  # first, so the scan stops early ("-" is the file name MLIR gives text parsed from a string:
  # no source position).
  chosen = None
  for frame in _FRAME.finditer(text):
    if frame.group(1) == "-":
      continue
    if not _is_library_file(frame.group(1)):
      chosen = frame.groups()
      break
    chosen = chosen or frame.groups()
  if chosen is None:
    return Location(name=name) if name else UNKNOWN_LOCATION
  file, line, col = chosen
  return Location(name=name, file=file, line=int(line), col=int(col))
