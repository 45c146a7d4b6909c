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
  # "-" is the file name MLIR gives text parsed from a string: no source position.
  frames = [f for f in _FRAME.findall(text) if f[0] != "-"]
  name = ""
  if name_match and not _FRAME.match(text[len("loc("):]):
    name = name_match.group(1)
  user_frames = [f for f in frames if not _is_library_file(f[0])]
  chosen = user_frames[0] if user_frames else (frames[0] if frames else None)
  if chosen is None:
    return Location(name=name) if name else UNKNOWN_LOCATION
  file, line, col = chosen
  return Location(name=name, file=file, line=int(line), col=int(col))
