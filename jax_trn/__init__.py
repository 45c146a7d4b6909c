"""jax-trn: AWS Trainium for JAX, as a PJRT plugin over a cycle-approximate NeuronCore simulator.

Installing the package registers the `trn` platform (jax_trn.plugin); `jax.devices("trn")` then
lists NeuronCores. This module is the user-facing API: configuration, profiles, compile reports.
"""

import warnings

from jax_trn import _compat, _libraries

_compat.check_jaxlib_version()

__version__ = "0.1.0"

__all__ = ["TrnConfig", "configure", "ExecutionProfile", "last_execution", "compile_report",
           "compile_reports", "__version__"]

# Without its compiled libraries (a source tree shadowing the installed package) the package still
# imports, so that JAX's plugin discovery reaches jax_trn.plugin, which makes the failure loud.
LIBRARIES_MISSING = _libraries.missing()

if LIBRARIES_MISSING is None:
  from jax_trn.config import TrnConfig, configure  # noqa: E402
  from jax_trn.profile import ExecutionProfile, last_execution  # noqa: E402
  from jax_trn.reports import compile_report, compile_reports  # noqa: E402
else:
  warnings.warn(LIBRARIES_MISSING, RuntimeWarning, stacklevel=2)

  def __getattr__(name: str):
    if name in __all__:
      raise ImportError(LIBRARIES_MISSING)
    raise AttributeError(f"module 'jax_trn' has no attribute {name!r}")
