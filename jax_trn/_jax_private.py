"""The plugin's private JAX symbols, gathered in one place (checked against jax and jaxlib
0.10.2, the one version `_compat.check_jaxlib_version` accepts).

Every other module of jax_trn uses public API only; a test (tests/test_import_graph.py) fails if
`jax._src` appears anywhere else. Each symbol here is one JAX has no public spelling for:

- `jax._src.xla_bridge.register_plugin`: how a `jax_plugins` entry point registers a PJRT plugin
  (JAX's plugin docs name it; there is no public alias).
- `jax._src.xla_bridge._backend_factories`: whether "trn" is registered already (the entry point
  and an explicit `jax_trn.plugin.initialize()` may both run).
- `jax._src.xla_bridge._backends`: whether the trn backend has started (the configuration is read
  then, so `jax_trn.configure` must refuse afterwards).
- `jax._src.xla_bridge.register_backend_factory(..., fail_quietly=False)`: a backend whose
  creation fails with our message; JAX raises it from the first `jax.devices()`, where an
  exception out of a plugin's import or `initialize()` is only logged (jax_trn/_libraries.py).
- `jax._src.interpreters.mlir._platforms_with_donation`: the platforms whose lowering keeps
  `donate_argnums` (`tf.aliasing_output`); for any other, JAX drops donation with a warning.
  The plugin implements donation (hlo_lowering/backend/alias_donations.py and the runtime's
  Execute), so it adds "trn".
- `jax._src.lax.linalg.<name>_p`: the linear-algebra primitives whose lowering JAX registers
  only for cpu/cuda/rocm/tpu (eigh, eig, schur, ...); `jax._src.interpreters.mlir`'s
  `register_lowering` and `lower_fun`: how a platform gives such a primitive a lowering written
  in JAX (jax_trn/linalg.py). JAX's own pure-JAX algorithms are registered the same way.
- `jax._src.callback` / `jax._src.debugging`'s `pure_callback_p`, `io_callback_p`,
  `debug_callback_p`, `debug_print_p` and their cpu lowering rules
  (`jax._src.interpreters.mlir._platform_specific_lowerings`, `_lowerings`): JAX lowers host
  callbacks only for cpu/cuda/rocm/tpu (`emit_python_callback`); jax_trn/host_callbacks.py runs
  JAX's own cpu rule for trn and re-targets the custom call it emits.

Imported when first used, so importing jax_trn does not import JAX's internals.
"""

from __future__ import annotations

from typing import Callable


def plugin_registered(platform: str) -> bool:
  from jax._src import xla_bridge
  return platform in xla_bridge._backend_factories


def backend_started(platform: str) -> bool:
  from jax._src import xla_bridge
  return platform in getattr(xla_bridge, "_backends", {})


def register_plugin(platform: str, *, priority: int, library_path: str,
                    options: Callable[[], dict]) -> None:
  from jax._src import xla_bridge
  xla_bridge.register_plugin(platform, priority=priority, library_path=library_path,
                             options=options)


def enable_donation(platform: str) -> None:
  from jax._src.interpreters import mlir
  if platform not in mlir._platforms_with_donation:
    mlir._platforms_with_donation.append(platform)


def register_failing_backend(platform: str, *, priority: int, message: str) -> None:
  from jax._src import xla_bridge

  def fail():
    raise RuntimeError(message)

  xla_bridge.register_backend_factory(platform, fail, priority=priority, fail_quietly=False)


def linalg_primitive(name: str):
  """The lax.linalg primitive `name` ("eigh", "eig", ...)."""
  from jax._src.lax import linalg
  return getattr(linalg, f"{name}_p")


def register_jax_lowering(primitive, impl: Callable, platform: str,
                          multiple_results: bool) -> None:
  """Lowers `primitive` on `platform` by tracing `impl(*operands, **params)` (JAX functions)."""
  from jax._src.interpreters import mlir
  mlir.register_lowering(primitive, mlir.lower_fun(impl, multiple_results=multiple_results),
                         platform=platform)


def register_refusing_lowering(primitive, platform: str, message: str) -> None:
  """Lowering `primitive` on `platform` raises NotImplementedError(message)."""
  from jax._src.interpreters import mlir

  def refuse(ctx, *args, **params):
    raise NotImplementedError(message)

  mlir.register_lowering(primitive, refuse, platform=platform)


def callback_primitives() -> tuple:
  """The primitives that call Python from a compiled program (jax 0.10.2)."""
  from jax._src import callback, debugging
  return (callback.pure_callback_p, callback.io_callback_p, debugging.debug_callback_p,
          debugging.debug_print_p)


def cpu_lowering_rule(primitive) -> Callable:
  """JAX's lowering rule of `primitive` for platform cpu (its cpu-specific one, else its generic
  one)."""
  from jax._src.interpreters import mlir
  entry = mlir._platform_specific_lowerings["cpu"].get(primitive) or mlir._lowerings[primitive]
  return entry.rule


def register_uncacheable_lowering(primitive, rule: Callable, platform: str) -> None:
  """`rule` lowers `primitive` on `platform`; JAX never reuses one lowering of it for another
  equation (each lowering registers its own callable)."""
  from jax._src.interpreters import mlir
  mlir.register_lowering(primitive, rule, platform=platform, cacheable=False)
