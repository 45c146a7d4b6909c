"""Whether this `jax_trn` has its compiled libraries, and what to do when it has not.

Python puts the current directory first on sys.path (`python -c`, `python -m`), so in a checkout of
the repository `import jax_trn` finds the source tree, which has no compiled libraries until it
is built in place, even when jax-trn is installed. JAX imports its plugins inside a `try` and only
logs the failure, then runs on CPU, so an ImportError at import time would leave the user with
CPU devices and a log line. Instead the package imports, warns, and fails at first use with the
message below: `import jax_trn` attributes raise ImportError, the JAX backend raises it from
`jax.devices()` (JAX does not swallow a plugin's failing backend factory), torch_xla's plugin and
the command-line tool stop with it.
"""

from __future__ import annotations

import pathlib
from importlib import metadata

PACKAGE_DIR = pathlib.Path(__file__).resolve().parent
PJRT_LIBRARY = PACKAGE_DIR / "libpjrt_trn.so"


def _installed_package_dir() -> pathlib.Path | None:
  """Where the installed jax-trn distribution keeps its compiled extension, if that is not here."""
  try:
    files = metadata.distribution("jax-trn").files or ()
  except metadata.PackageNotFoundError:
    return None
  for file in files:
    if file.parts[0] == "jax_trn" and file.name.startswith("_native") and file.suffix == ".so":
      where = pathlib.Path(file.locate()).resolve().parent
      if where != PACKAGE_DIR and where.is_dir():
        return where
  return None


def missing() -> str | None:
  """None when the compiled libraries load; else why not and what to do."""
  try:
    from jax_trn import _native  # noqa: F401  (the compiled runtime bindings)
    error = None if PJRT_LIBRARY.exists() else f"no {PJRT_LIBRARY.name}"
  except ImportError as e:
    error = str(e) if any(PACKAGE_DIR.glob("_native*.so")) else "no _native extension"
  if error is None:
    return None
  installed = _installed_package_dir()
  if installed is not None:
    return (f"jax_trn was imported from {PACKAGE_DIR}, a source tree without its compiled "
            f"libraries ({error}), which shadows the installed jax-trn in {installed}: Python "
            "puts the current directory first on sys.path. Run from another directory, or build "
            "the source tree in place (docs/developing.md, -DTRN_INPLACE=ON).")
  return (f"jax_trn's compiled libraries are missing from {PACKAGE_DIR} ({error}): install "
          "jax-trn (pip install .), or build the source tree in place (docs/developing.md, "
          "-DTRN_INPLACE=ON).")


def require() -> None:
  """Raises ImportError with `missing()`'s message when the libraries are missing."""
  problem = missing()
  if problem is not None:
    raise ImportError(problem)
