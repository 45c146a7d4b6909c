"""The one JAX version jax-trn is built and tested against, checked before anything touches JAX.

The plugin relies on measured behaviour of one jaxlib (shared/design/pjrt-contract.md): the
serialized StableHLO version, private registration hooks, the PJRT C API the client speaks. A
different jaxlib fails here with a message saying what to install, not later with a crash.
"""

from importlib import metadata

TESTED_JAXLIB = "0.10.2"


def check_jaxlib_version() -> None:
  try:
    found = metadata.version("jaxlib")
  except metadata.PackageNotFoundError:
    raise ImportError(
        f"jax-trn needs jaxlib=={TESTED_JAXLIB}, and jaxlib is not installed: "
        f"pip install 'jax=={TESTED_JAXLIB}' 'jaxlib=={TESTED_JAXLIB}'") from None
  if found != TESTED_JAXLIB:
    raise ImportError(
        f"jax-trn is built and tested against jaxlib=={TESTED_JAXLIB}, "
        f"but jaxlib=={found} is installed: pip install 'jax=={TESTED_JAXLIB}' "
        f"'jaxlib=={TESTED_JAXLIB}'")
