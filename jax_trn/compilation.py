"""The plugin's compile service: what PJRT_Client_Compile calls (pjrt_plugin/compiler_bridge.cc).

    compile_for_pjrt(code, fmt, options, target) -> program bytes
    cost_analysis_for_pjrt(source) -> {"flops", "transcendentals", "bytes accessed"}

The C++ bridge passes the program, the compile options it parsed (a dict of
`hlo_lowering.compiler.CompileOptions` fields) and the client's target description. This module
holds the policy around the pure compiler (`hlo_lowering.compiler.compile_program`): it serves
programs from the persistent compile cache (`compile_cache.py`, `TRN_CACHE_DIR`) when it holds them
(a hit returns the stored program and records the stored compile report, identical in content to
what a compile would make: when the request differs from the stored one only in source locations,
both carry the request's, source_locations.py; a request whose exact bytes were compiled or served
before is found through an alias, without parsing it), counts compilations and keeps every compile report of this process
(`compile_count()`, `cache_stats()`, `last_report()`, `reports()`; `jax_trn.compile_report()`).
`compile_count()` counts the compilations requested of this process (hits included: what JAX asked
to compile); `cache_stats()` tells hits, misses and the real compiles apart. The garbage collector
is paused while the compiler runs (gc_pause.py says why).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import warnings
from collections.abc import Mapping

from hlo_lowering import compiler, cost_analysis, importer, module_identity, pipeline
from hlo_lowering.errors import FAILED_PRECONDITION, CompileError
from hlo_lowering.report import FLOAT64_AS_FLOAT32, CompileReport
from jax_trn import compile_cache, config, gc_pause, host_callbacks, source_locations

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
  verification requested, a patched pipeline, host callbacks, compile_text), and real compiles (misses +
  bypassed, successful or not)."""
  with _lock:
    return dict(_cache_stats)


def last_report() -> CompileReport | None:
  return _reports[-1] if _reports else None


def reports() -> list[CompileReport]:
  return list(_reports)


def _next_tag() -> str:
  global _compile_count
  with _lock:
    _compile_count += 1
    return str(_compile_count)


def _compile(code: bytes, fmt: str, options: compiler.CompileOptions, target: Mapping,
             tag: str) -> tuple[bytes, CompileReport]:
  with _lock:
    _cache_stats["compiles"] += 1
  with gc_pause.paused():
    program, report = compiler.compile_program(code, fmt, options, target, dump_tag=tag)
  _record(report)
  return program, report


def _record(report: CompileReport) -> None:
  with _lock:
    _reports.append(report)
  logger.info("%s", report)
  _enforce_strict(report)
  if report.float64_as_float32:  # every compile that narrows says so, cache hits included
    warnings.warn(f"jax-trn: {report.module or 'a program'}: {FLOAT64_AS_FLOAT32}",
                  Float64AsFloat32Warning, stacklevel=2)


class Float64AsFloat32Warning(UserWarning):
  """A compile computes float64 as float32 (TRN_FLOAT64=float32)."""


_STRICT_LISTED = 20


def _enforce_strict(report: CompileReport) -> None:
  """Strict mode (TRN_STRICT=1, configure(strict=True)): a program with an op on the GpSimd
  general-purpose path (the slow one) fails to compile, listing every such op where it is."""
  slow = report.gpsimd_ops()
  if not slow or not config.current().strict:
    return
  lines = [f"  {e.op} at {e.location or 'unknown location'}" + (f" ({e.name})" if e.name else "")
           for e in slow[:_STRICT_LISTED]]
  if len(slow) > _STRICT_LISTED:
    lines.append(f"  ... and {len(slow) - _STRICT_LISTED} more")
  raise CompileError(
      f"strict mode (TRN_STRICT=1): {len(slow)} op(s) would run on the GpSimd general-purpose "
      "path, far slower than the engines' native lowering:\n" + "\n".join(lines)
      + "\nRewrite them (docs/coverage.md lists what lowers natively) or turn strict mode off "
      "(TRN_STRICT=0).", FAILED_PRECONDITION)


def _pipeline() -> tuple:
  """The passes and back-end stages as the compiler will run them (read at call time)."""
  return pipeline.run_pipeline, pipeline.PASSES, pipeline.run_backend, pipeline.backend.STAGES


_PIPELINE = _pipeline()


def _cacheable(code: bytes) -> bool:
  """Whether the persistent cache may serve this compile: it is enabled, no compile-time side
  effect (IR dumps, IR verification) or a code generation the cache key does not name (TRN_UNROLL_LOOPS, TRN_ROW_DIVIDE_BY_RECIPROCAL) was asked for, and the pipeline is the one this source tree
  defines (a test or tool that patches it must really compile). A program with host callbacks
  never is: its callback keys live only as long as the executable JAX lowered it for
  (jax_trn/host_callbacks.py); the call target's name is looked for in the raw bytes (text,
  bytecode and HLO protos all hold it verbatim; a false match only costs a compile)."""
  if compile_cache.cache_dir() is None or host_callbacks.TARGET.encode() in code:
    return False
  if os.environ.get("TRN_DUMP_IR", "") or any(
      os.environ.get(name, "") not in ("", "0") for name in ("TRN_VERIFY_IR", "TRN_UNROLL_LOOPS",
                                                           "TRN_ROW_DIVIDE_BY_RECIPROCAL")):
    return False
  return _pipeline() == _PIPELINE


def _options_key(options: compiler.CompileOptions) -> bytes:
  return f"num_replicas={options.num_replicas},num_partitions={options.num_partitions}".encode()


def cost_analysis_for_pjrt(source: bytes) -> dict[str, float]:
  """PJRT_Executable_GetCostAnalysis: the static cost of the StableHLO text an executable was
  compiled from (`source`), by XLA's rules (hlo_lowering/cost_analysis.py)."""
  return cost_analysis.program_cost(importer.import_program(source, "mlir"))


def compile_for_pjrt(code: bytes, fmt: str, options: Mapping[str, int],
                     target: Mapping) -> bytes:
  """The plugin's compile: a NeuronCore program, or CompileError with a user-ready message.
  `options`: the parsed compile options (CompileOptions fields); `target`: the target
  description. Served from the persistent compile cache when it holds the program."""
  parsed = compiler.check_options(compiler.CompileOptions(**options))
  tag = _next_tag()
  if not _cacheable(code):
    with _lock:
      _cache_stats["bypassed"] += 1
    return _compile(code, fmt, parsed, target, tag)[0]
  start = time.perf_counter()
  options_key, target_name = _options_key(parsed), str(target["name"])
  exact_key = None
  try:
    # The exact bytes first: an alias serves a request seen before without parsing it.
    exact_key = compile_cache.make_key(code, fmt, options_key, target_name, target)
    entry = compile_cache.load(exact_key, compile_cache.ALIAS_SUFFIX)
    if entry is not None:
      return _served(entry.program, entry.report, exact_key, start)
    identity = module_identity.identify(code, fmt)
    key = compile_cache.make_key(identity.canonical, fmt, options_key, target_name, target)
    entry = compile_cache.load(key)
    source = identity.source if parsed.num_partitions == 1 else None
    served = None if entry is None else source_locations.reattach(entry, identity.locations,
                                                                    source)
  except CompileError:
    raise
  except Exception as e:  # noqa: BLE001 — the cache never makes a compile fail
    logger.warning("compile cache: lookup failed (%s); compiling", e)
    identity, key, entry, served = None, None, None, None
  if served is not None:
    _store_alias(exact_key, compile_cache.Entry(*served, identity.locations))
    return _served(*served, key, start)
  with _lock:
    _cache_stats["misses"] += 1
  program, report = _compile(code, fmt, parsed, target, tag)
  if key is not None:
    try:
      entry = compile_cache.Entry(program, report, identity.locations)
      if compile_cache.store(key, entry):
        _store_alias(exact_key, entry)
    except Exception as e:  # noqa: BLE001
      logger.warning("compile cache: store failed (%s)", e)
  logger.info("compile cache miss %s (%.1f ms)", (key or "-")[:16],
              (time.perf_counter() - start) * 1e3)
  return program


def _served(program: bytes, report: CompileReport, key: str, start: float) -> bytes:
  with _lock:
    _cache_stats["hits"] += 1
  logger.info("compile cache hit %s (%.1f ms)", key[:16], (time.perf_counter() - start) * 1e3)
  _record(report)
  return program


def _store_alias(exact_key: str, entry: compile_cache.Entry) -> None:
  """Stores what these exact request bytes were served, so that they are served it again without
  being parsed."""
  try:
    compile_cache.store(exact_key, entry, compile_cache.ALIAS_SUFFIX)
  except Exception as e:  # noqa: BLE001
    logger.warning("compile cache: alias store failed (%s)", e)


def compile_text(mlir_text: str, target: str = "trn2", lnc: int = 1) -> bytes:
  """Compiles StableHLO/MLIR text for a target by name (tests, tools, `jax-trn compile`) into a
  program for a device of `lnc` physical cores (1 by default: the reference the tests pin; a
  device runs its generation's default, trn2's 2); never consults the persistent cache."""
  config.check_lnc(target, lnc)
  with _lock:
    _cache_stats["bypassed"] += 1
  return _compile(mlir_text.encode("utf-8"), "mlir", compiler.CompileOptions(),
                  {**config.target_spec(target), "lnc": lnc}, _next_tag())[0]
