"""The one error type the compiler raises for programs a user can fix or we do not support."""

from __future__ import annotations

INVALID_ARGUMENT = "INVALID_ARGUMENT"
UNIMPLEMENTED = "UNIMPLEMENTED"
RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
FAILED_PRECONDITION = "FAILED_PRECONDITION"


class CompileError(Exception):
  """A message ready for users (op, shape, dtype, file:line) plus a PJRT error code.

  The plugin turns it into a PJRT_Error with `code`; any other exception out of the compiler is
  an internal compiler error.
  """

  def __init__(self, message: str, code: str = UNIMPLEMENTED):
    super().__init__(message)
    self.code = code
