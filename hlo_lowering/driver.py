"""The compiler entry points: `compile_for_pjrt` (called by the C++ plugin) and `compile_text`.

bytes → importer → pass pipeline → codegen → serialized NeuronCore program. Keeps a compile
counter and every compile report (`compile_count()`, `last_report()`, `reports()`).
"""

from __future__ import annotations

import logging
import threading

from hlo_lowering import codegen, importer, pipeline
from hlo_lowering.errors import CompileError, INVALID_ARGUMENT, UNIMPLEMENTED
from hlo_lowering.report import CompileReport

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_compile_count = 0
_reports: list[CompileReport] = []


def compile_count() -> int:
  """How many programs this process has compiled (successfully or not)."""
  return _compile_count


def last_report() -> CompileReport | None:
  return _reports[-1] if _reports else None


def reports() -> list[CompileReport]:
  return list(_reports)


def _check_compile_options(compile_options: bytes) -> None:
  if not compile_options:
    return
  from jax._src.lib import xla_client
  try:
    options = xla_client.CompileOptions.ParseFromString(compile_options)
  except Exception as e:  # the binding raises a bare RuntimeError/ValueError on a bad proto
    raise CompileError(f"compile options are not a valid CompileOptionsProto: {e}",
                       INVALID_ARGUMENT) from e
  replicas, partitions = options.num_replicas, options.num_partitions
  if replicas > 1 or partitions > 1:
    raise CompileError(
        "multi-device programs (pmap, shard_map, sharded jit: "
        f"{max(replicas, partitions)} {'partitions' if partitions > 1 else 'replicas'}) are not "
        f"supported yet (num_replicas={replicas}, num_partitions={partitions}); run on one "
        "NeuronCore device", UNIMPLEMENTED)


def _target_spec(target: str) -> dict:
  from jax_trn import _native
  return _native.target_spec(target)


def _compile(code: bytes, fmt: str, target: str) -> bytes:
  global _compile_count
  with _lock:
    _compile_count += 1
    tag = str(_compile_count)
  module = importer.import_program(code, fmt)
  report = CompileReport(module=str(module.attrs.get("sym_name", "")), target=target)
  pipeline.run_pipeline(module, tag=tag)
  builder = codegen.generate(module, target, _target_spec(target), report)
  program = builder.serialize()
  with _lock:
    _reports.append(report)
  logger.info("%s", report)
  return program


def compile_for_pjrt(code: bytes, fmt: str, compile_options: bytes, target: str) -> bytes:
  """The plugin's compile: a NeuronCore program, or CompileError with a user-ready message."""
  _check_compile_options(compile_options)
  return _compile(code, fmt, target)


def compile_text(mlir_text: str, target: str = "trn2") -> bytes:
  """Compiles StableHLO/MLIR text (tests, tools)."""
  return _compile(mlir_text.encode("utf-8"), "mlir", target)
