"""jax-trn: AWS Trainium for JAX, as a PJRT plugin over a cycle-approximate NeuronCore simulator.

Installing the package registers the `trn` platform (jax_trn.plugin); `jax.devices("trn")` then
lists NeuronCores. This module is the user-facing API: configuration, profiles, compile reports.
"""

from jax_trn import _compat

_compat.check_jaxlib_version()

try:
  from jax_trn import _native  # noqa: F401  (the compiled runtime bindings)
except ImportError as e:
  import pathlib
  raise ImportError(
      f"jax_trn's compiled extension is missing from {pathlib.Path(__file__).parent}: this looks "
      "like an unbuilt source tree shadowing the installed package. Run from another directory "
      "after `pip install .`, or build in place (docs/developing.md).") from e

from jax_trn.config import TrnConfig, configure  # noqa: E402
from jax_trn.profile import ExecutionProfile, last_execution  # noqa: E402
from jax_trn.reports import compile_report, compile_reports  # noqa: E402

__version__ = "0.1.0"

__all__ = ["TrnConfig", "configure", "ExecutionProfile", "last_execution", "compile_report",
           "compile_reports", "__version__"]
