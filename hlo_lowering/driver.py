"""The compiler entry points: `compile_for_pjrt` (called by the C++ plugin) and `compile_text`.

bytes → importer → pass pipeline → codegen → serialized NeuronCore program. Keeps a compile
counter and every compile report (`compile_count()`, `last_report()`, `reports()`).

`compile_for_pjrt` serves programs from the persistent compile cache (`compile_cache.py`,
`TRN_CACHE_DIR`) when it holds them: a hit returns the stored program bytes and appends the stored
compile report, identical in content to the one the compile made. `compile_count()` counts the
compilations requested of this process (hits included: what JAX asked to compile);
`cache_stats()` tells hits, misses and the real compiles apart.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from hlo_lowering import codegen, compile_cache, importer, ir, pipeline
from hlo_lowering.errors import CompileError, INVALID_ARGUMENT, UNIMPLEMENTED
from hlo_lowering.report import CompileReport

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_compile_count = 0
_cache_stats = {"hits": 0, "misses": 0, "bypassed": 0, "compiles": 0}
_reports: list[CompileReport] = []


def compile_count() -> int:
  """How many compilations this process was asked for (successful or not), cache hits included:
  a program JAX reuses from its in-memory executable cache does not count; one served from the
  persistent cache does. `cache_stats()["compiles"]` counts only the real compiles."""
  return _compile_count


def cache_stats() -> dict[str, int]:
  """{"hits", "misses", "bypassed", "compiles"} of this process: persistent-cache hits, misses
  (then compiled and stored), compiles that did not consult the cache (cache disabled, IR dumps or
  verification requested, a patched pipeline, compile_text), and real compiles (misses +
  bypassed, successful or not)."""
  with _lock:
    return dict(_cache_stats)


def last_report() -> CompileReport | None:
  return _reports[-1] if _reports else None


def reports() -> list[CompileReport]:
  return list(_reports)


# Ops that talk to other replicas or whose result depends on which replica runs them.
_CROSS_REPLICA_OPS = frozenset({
    "stablehlo.all_reduce", "stablehlo.all_gather", "stablehlo.all_to_all",
    "stablehlo.reduce_scatter", "stablehlo.collective_permute", "stablehlo.collective_broadcast",
    "stablehlo.replica_id", "stablehlo.partition_id", "stablehlo.send", "stablehlo.recv"})


def _multi_device_error(replicas: int, partitions: int, why: str = "") -> CompileError:
  return CompileError(
      "multi-device programs (pmap, shard_map, sharded jit: "
      f"{max(replicas, partitions)} {'partitions' if partitions > 1 else 'replicas'}{why}) are "
      f"not supported yet (num_replicas={replicas}, num_partitions={partitions}); run on one "
      "NeuronCore device", UNIMPLEMENTED)


def _check_compile_options(compile_options: bytes) -> int:
  """The number of replicas; refuses partitioned programs."""
  if not compile_options:
    return 1
  from jax._src.lib import xla_client
  try:
    options = xla_client.CompileOptions.ParseFromString(compile_options)
  except Exception as e:  # the binding raises a bare RuntimeError/ValueError on a bad proto
    raise CompileError(f"compile options are not a valid CompileOptionsProto: {e}",
                       INVALID_ARGUMENT) from e
  replicas, partitions = options.num_replicas, options.num_partitions
  if partitions > 1:
    raise _multi_device_error(replicas, partitions)
  return max(replicas, 1)


def _check_replicated(module, replicas: int) -> None:
  """A program compiled for several replicas (torch_xla compiles every program with
  num_replicas = device count) is the same single-device program on each of them, and runs on
  whichever device Execute names, unless it communicates between replicas."""
  if replicas == 1:
    return
  for function in module.functions.values():
    for op in ir.walk_ops(function.body):
      if op.name in _CROSS_REPLICA_OPS:
        raise _multi_device_error(replicas, 1, f", {op.name} at {op.loc}")


def _target_spec(target: str) -> dict:
  from jax_trn import _native
  return _native.target_spec(target)


def _compile(code: bytes, fmt: str, target: str, replicas: int = 1,
             tag: str | None = None) -> tuple[bytes, CompileReport]:
  global _compile_count
  with _lock:
    _cache_stats["compiles"] += 1
    if tag is None:
      _compile_count += 1
      tag = str(_compile_count)
  module = importer.import_program(code, fmt)
  _check_replicated(module, replicas)
  report = CompileReport(module=str(module.attrs.get("sym_name", "")), target=target)
  pipeline.run_pipeline(module, tag=tag)
  target_spec = _target_spec(target)
  builder = codegen.generate(module, target, target_spec, report)
  pipeline.run_backend(builder, target_spec, report, tag=tag)
  program = builder.serialize()
  with _lock:
    _reports.append(report)
  logger.info("%s", report)
  return program, report


_PIPELINE = (pipeline.run_pipeline, pipeline.PASSES, pipeline.run_backend, pipeline.backend.STAGES)


def _cacheable() -> bool:
  """Whether the persistent cache may serve this compile: it is enabled, no compile-time side
  effect (IR dumps, IR verification) was asked for, and the pipeline is the one this source tree
  defines (a test or tool that patches it must really compile)."""
  if compile_cache.cache_dir() is None:
    return False
  if os.environ.get("TRN_DUMP_IR", "") or os.environ.get("TRN_VERIFY_IR", "") not in ("", "0"):
    return False
  return (pipeline.run_pipeline, pipeline.PASSES, pipeline.run_backend,
          pipeline.backend.STAGES) == _PIPELINE


def compile_for_pjrt(code: bytes, fmt: str, compile_options: bytes, target: str) -> bytes:
  """The plugin's compile: a NeuronCore program, or CompileError with a user-ready message.
  Served from the persistent compile cache when it holds the program."""
  global _compile_count
  replicas = _check_compile_options(compile_options)
  if not _cacheable():
    with _lock:
      _cache_stats["bypassed"] += 1
    return _compile(code, fmt, target, replicas)[0]
  start = time.perf_counter()
  with _lock:
    _compile_count += 1
    tag = str(_compile_count)
  try:
    # Only the options the compiler reads: the serialized proto itself is not deterministic
    # across processes (DebugOptions holds protobuf maps serialized in hash order).
    options_key = f"num_replicas={replicas}".encode()
    key = compile_cache.make_key(code, fmt, options_key, target, _target_spec(target))
    entry = compile_cache.load(key)
  except Exception as e:  # noqa: BLE001 — the cache never makes a compile fail
    logger.warning("compile cache: lookup failed (%s); compiling", e)
    key, entry = None, None
  if entry is not None:
    program, report = entry
    with _lock:
      _cache_stats["hits"] += 1
      _reports.append(report)
    logger.info("compile cache hit %s (%.1f ms)", key[:16], (time.perf_counter() - start) * 1e3)
    logger.info("%s", report)
    return program
  with _lock:
    _cache_stats["misses"] += 1
  program, report = _compile(code, fmt, target, replicas, tag=tag)
  if key is not None:
    try:
      compile_cache.store(key, program, report)
    except Exception as e:  # noqa: BLE001
      logger.warning("compile cache: store failed (%s)", e)
  logger.info("compile cache miss %s (%.1f ms)", (key or "-")[:16],
              (time.perf_counter() - start) * 1e3)
  return program


def compile_text(mlir_text: str, target: str = "trn2") -> bytes:
  """Compiles StableHLO/MLIR text (tests, tools); never consults the persistent cache."""
  with _lock:
    _cache_stats["bypassed"] += 1
  return _compile(mlir_text.encode("utf-8"), "mlir", target)[0]
