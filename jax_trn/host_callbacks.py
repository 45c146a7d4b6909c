"""Host callbacks on trn: `jax.debug.print`, `jax.debug.callback`, `jax.pure_callback` and
`jax.experimental.io_callback` (ordered and unordered), inside jit, loops and vmap.

JAX lowers these only for cpu/cuda/rocm/tpu. `register()` (called by jax_trn.plugin.initialize)
gives each callback primitive a trn lowering that runs JAX's own cpu rule (its shape and dtype
checks, its token threading for ordered effects) and re-targets the custom call that rule emits:
`@xla_ffi_python_cpu_callback` with an index into the module's host callbacks becomes
`@trn_host_callback` whose backend_config holds `callback`, a key of this module's registry. The
compiler lowers that call to one `host_callback` instruction (hlo_lowering/lowering/host_callback.py);
when an execution reaches it, the runtime copies the operands out of simulated HBM and the
plugin calls `run(key, rank, operands, results)` with the GIL taken on the queue's worker
thread (pjrt_plugin/host_callback_bridge.cc), which calls the Python callable and writes its
results.

Several cores: a program partitioned over several cores (jit over sharded arrays) gets JAX's
maximal sharding on its callbacks (logical device d: "execute it only once on the full logical
value"). A callback without results then runs on core d only; one with results runs on every
core (each needs them, and the partitioner has no broadcast of host results yet), so an
io_callback with results runs once per core there. pmap programs carry no such sharding: each
core runs its callbacks on its own values, as on the CPU backend.

Lifetime: the registry holds a callable while anything that may run it lives: the JAX executable
lowered with it (a keepalive of the lowering) and the plugin's loaded executable and each of its
queued runs (`hold`/`release`, pjrt_plugin/host_callback_bridge.cc): a run dispatched
asynchronously still finds its callable after JAX has freed the executable. A key is this process's random nonce
(31 bits, above bit 32) and a serial number, so a program compiled with host callbacks is useless
elsewhere: the compile cache never stores or serves one (jax_trn/compilation.py), and a program
that reaches a key this process does not hold (a freed executable, a deserialized program) fails
with an error saying so. docs/host-callbacks.md.

Exit: Python ends any other thread that takes the GIL once the interpreter finalizes, and one
ended inside jaxlib (JAX's callback wrappers create the CPU client with the GIL released) aborts
the process. So an atexit hook (registered after JAX's, so it runs before them) stops the
plugin's calls into Python and waits, the GIL released, for the runs queued with host callbacks
to finish, as the CPU backend does: a pending print still prints; a run queued later gets its
callbacks cancelled (pjrt_plugin/sim/host_call_permit.h).
"""

from __future__ import annotations

import atexit
import dataclasses
import itertools
import os
import re
import threading
import weakref
from collections.abc import Callable, Sequence

import numpy as np

from jax_trn import _jax_private

PLATFORM = "trn"
# hlo_lowering.lowering.host_callback.HOST_CALLBACK_TARGET (read by the compiler).
TARGET = "trn_host_callback"
# What JAX's cpu rule emits (partitioned=True debug callbacks: the second).
_JAX_CPU_TARGETS = ("xla_ffi_python_cpu_callback", "xla_ffi_partitioned_python_cpu_callback")

# 31 random bits above a 32-bit serial: keys stay below 2^63, what an MLIR integer attribute holds.
_NONCE = (int.from_bytes(os.urandom(4), "little") >> 1) << 32
_serials = itertools.count(1)
# Reentrant: a registration's finalizer (release) may run from a garbage collection that an
# allocation under the lock triggers, on the same thread.
_lock = threading.RLock()


@dataclasses.dataclass(frozen=True)
class _Value:
  shape: tuple[int, ...]
  dtype: np.dtype

  @property
  def nbytes(self) -> int:
    return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


# A token travels as a zero-size pred[0] value (hlo_lowering/attributes.py TOKEN_TYPE).
_TOKEN = _Value((0,), np.dtype(np.bool_))


@dataclasses.dataclass(frozen=True)
class _Callback:
  fn: Callable  # JAX's wrapped callable: checks the results' count, shapes and dtypes
  operands: tuple[_Value, ...]
  results: tuple[_Value, ...]
  # The one core (rank) that runs it (a maximal sharding, and no results); None: every core.
  core: int | None = None


# key -> the callable; key -> how many holders it has (it leaves the registry at 0).
_registry: dict[int, _Callback] = {}
_holders: dict[int, int] = {}


class _Registration:
  """Held by the lowering's keepalives (so by the JAX executable): one holder of its key."""

  def __init__(self, key: int):
    self.key = key
    weakref.finalize(self, release, [key])


def hold(keys: Sequence[int]) -> None:
  """One more holder of each key this process has registered (others are ignored: their run
  fails with a clear error)."""
  with _lock:
    for key in keys:
      if key in _holders:
        _holders[key] += 1


def release(keys: Sequence[int]) -> None:
  with _lock:
    for key in keys:
      if key in _holders:
        _holders[key] -= 1
        if _holders[key] == 0:
          del _holders[key], _registry[key]


def registered() -> int:
  """How many host callbacks this process holds (tests: freed executables release theirs)."""
  with _lock:
    return len(_registry)


def _register(callback: _Callback) -> _Registration:
  with _lock:
    key = _NONCE | next(_serials)
    _registry[key] = callback
    _holders[key] = 1
  return _Registration(key)


def run(key: int, rank: int, operands: Sequence[memoryview],
        results: Sequence[memoryview]) -> None:
  """Called by the plugin when core `rank` of an execution reaches a host_callback instruction:
  the non-empty operands' bytes (dense row-major, read-only, valid during the call), storage for
  the non-empty results' bytes."""
  with _lock:
    callback = _registry.get(key)
  if callback is None:
    raise RuntimeError(
        f"host callback {key:#x} is not registered in this process: the program was compiled "
        "in another process, or loaded again after every executable holding it was freed (host "
        "callbacks live with the executables JAX lowered them for)")
  if callback.core is not None and rank != callback.core:
    return
  views = iter(operands)
  args = [np.zeros(v.shape, v.dtype) if v.nbytes == 0
          else np.frombuffer(next(views), dtype=v.dtype).reshape(v.shape).copy()
          for v in callback.operands]
  outputs = callback.fn(*args)
  storage = iter(results)
  for value, out in zip(callback.results, outputs):
    if value.nbytes == 0:
      continue
    data = np.ascontiguousarray(out, dtype=value.dtype).reshape(-1).view(np.uint8)
    view = next(storage)
    if data.size != len(view):
      raise RuntimeError(f"host callback result {value.dtype}{list(value.shape)}: got "
                         f"{data.size} bytes for {len(view)}")
    view[:] = data.tobytes()


def _values(avals, count: int) -> tuple[_Value, ...]:
  """The callable's values, a leading token first when the call has one more than `avals`."""
  values = tuple(_Value(tuple(a.shape), np.dtype(a.dtype)) for a in avals)
  if count == len(values) + 1:
    return (_TOKEN, *values)
  if count != len(values):
    raise NotImplementedError(f"a host callback with {count} values for {len(values)} avals "
                              "is not supported on trn")
  return values


def _emitted_call(block, index: int):
  """The custom call JAX's cpu rule just emitted for host callback `index` (the block's most
  recent such call)."""
  from jaxlib.mlir import ir
  for op in reversed(list(block.operations)):
    op = op.operation
    if op.name != "stablehlo.custom_call":
      continue
    if ir.StringAttr(op.attributes["call_target_name"]).value not in _JAX_CPU_TARGETS:
      continue
    config = ir.DictAttr(op.attributes["mhlo.backend_config"])
    if ir.IntegerAttr(config["index"]).value == index:
      return op
  raise NotImplementedError("a host callback lowered outside the current block is not "
                            "supported on trn")


# JAX's maximal sharding of a callback: for shardy a mesh without axes on one logical device,
# inline as the rule leaves it (`mesh<[], device_ids=[<d>]>`, later lifted into the module's
# `@maximal_mesh_<d>`); for GSPMD `{maximal device=<d>}`.
_MAXIMAL = re.compile(r"mesh<\[\], device_ids=\[(\d+)\]>|@maximal_mesh_(\d+)\b|"
                      r"\{maximal device=(\d+)\}")


def _maximal_core(op) -> int | None:
  """The logical device (= core rank: one replica) of a maximal sharding on `op`, if any."""
  for name in ("sdy.sharding", "mhlo.sharding"):
    if name in op.attributes:
      found = _MAXIMAL.search(str(op.attributes[name]))
      if found:
        return int(next(g for g in found.groups() if g is not None))
  return None


def _retarget(op, key: int) -> None:
  from jaxlib.mlir import ir
  op.attributes["call_target_name"] = ir.StringAttr.get(TARGET)
  op.attributes["mhlo.backend_config"] = ir.DictAttr.get(
      {"callback": ir.IntegerAttr.get(ir.IntegerType.get_unsigned(64), key)})


def _trn_rule(cpu_rule: Callable) -> Callable:
  def rule(ctx, *args, **params):
    from jaxlib.mlir import ir
    module_context = ctx.module_context
    callbacks = module_context.host_callbacks
    first = len(callbacks)
    # JAX's own rule as it runs for cpu: only the custom call's name and config are per-platform.
    cpu_ctx = ctx.replace(module_context=module_context.replace(platforms=("cpu",), backend=None))
    results = cpu_rule(cpu_ctx, *args, **params)
    if cpu_ctx.tokens_out is not None:
      ctx.set_tokens_out(cpu_ctx.tokens_out)
    if len(callbacks) != first + 1:
      raise NotImplementedError(f"{len(callbacks) - first} host callbacks from one equation "
                                "are not supported on trn")
    op = _emitted_call(ir.InsertionPoint.current.block, first)
    values_out = _values(ctx.avals_out, len(op.results))
    core = _maximal_core(op) if all(v.nbytes == 0 for v in values_out) else None
    callback = _Callback(callbacks[first], _values(ctx.avals_in, len(op.operands)), values_out,
                         core)
    registration = _register(callback)
    module_context.add_keepalive(registration)
    _retarget(op, registration.key)
    return results
  return rule


def _stop_plugin_python_calls() -> None:
  """The atexit hook (see the module docstring)."""
  from jax_trn import _native
  _native.stop_host_calls()  # releases the GIL: the runs' callbacks take it


def register() -> None:
  """Lowerings of the callback primitives for "trn" (a known platform by now), and the exit hook
  that lets their runs finish before the interpreter finalizes."""
  atexit.register(_stop_plugin_python_calls)
  for primitive in _jax_private.callback_primitives():
    _jax_private.register_uncacheable_lowering(
        primitive, _trn_rule(_jax_private.cpu_lowering_rule(primitive)), PLATFORM)
