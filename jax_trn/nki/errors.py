"""KernelError: a kernel broke a hardware rule or used the API wrongly, reported at the kernel's
own source line (the innermost frame outside jax_trn.nki), as the NKI compiler reports it."""

from __future__ import annotations

import functools
import linecache
import os
import sys

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class KernelError(ValueError):
  """A kernel breaks a rule of the NeuronCore or of the NKI API; the message starts with the
  kernel's file:line."""


@functools.lru_cache(maxsize=None)
def _in_package(filename: str) -> bool:
  return os.path.dirname(os.path.abspath(filename)) == _PACKAGE_DIR


def kernel_position() -> str:
  """'file.py:LINE' of the innermost caller outside this package (the kernel's line)."""
  frame = sys._getframe(1)
  while frame is not None and _in_package(frame.f_code.co_filename):
    frame = frame.f_back
  if frame is None:
    return ""
  return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def kernel_error(message: str, position: str | None = None) -> KernelError:
  """A KernelError at `position` (default: the current kernel line), quoting that line."""
  position = kernel_position() if position is None else position
  if not position:
    return KernelError(message)
  filename, _, line = position.rpartition(":")
  source = linecache.getline(filename, int(line)).strip() if line.isdigit() else ""
  return KernelError(f"{position}: {message}" + (f"\n    {source}" if source else ""))
