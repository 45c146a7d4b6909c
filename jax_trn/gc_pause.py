"""Python's cyclic garbage collector paused while the compiler runs.

A compile allocates hundreds of thousands of IR, tile and instruction objects that stay alive
until it ends, so each collection it triggers finds almost nothing to free, while its full
collections walk the whole heap (JAX's and the user's objects too, not only the compiler's):
20-40 % of a transformer block's or a GPT step's compile time, and a share that grows with the
program (a chain of 2000 elementwise ops: 1.30 s with the collector, 0.83 s without). The
collector resumes when the last concurrent compile ends and collects then as usual; reference
counting frees everything without a cycle meanwhile.
"""

from __future__ import annotations

import contextlib
import gc
import threading

_lock = threading.Lock()
_depth = 0              # compiles running now
_resume = False         # whether the collector was on when the first of them began


@contextlib.contextmanager
def paused():
  """Pauses the collector for the duration (nested and concurrent uses share one pause; a
  collector that was off at the start stays off)."""
  global _depth, _resume
  with _lock:
    if _depth == 0:
      _resume = gc.isenabled()
      gc.disable()
    _depth += 1
  try:
    yield
  finally:
    with _lock:
      _depth -= 1
      if _depth == 0 and _resume:
        gc.enable()
