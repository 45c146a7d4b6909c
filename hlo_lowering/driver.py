"""The compiler entry points: `compile_for_pjrt` (called by the C++ plugin) and `compile_text`.

bytes → importer → pass pipeline → codegen → serialized NeuronCore program. Keeps a compile
counter and every compile report (`compile_count()`, `last_report()`, `reports()`).
"""

from __future__ import annotations

import logging
import threading

from hlo_lowering import codegen, importer, ir, pipeline
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


def _compile(code: bytes, fmt: str, target: str, replicas: int = 1) -> bytes:
  global _compile_count
  with _lock:
    _compile_count += 1
    tag = str(_compile_count)
  module = importer.import_program(code, fmt)
  _check_replicated(module, replicas)
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
  replicas = _check_compile_options(compile_options)
  return _compile(code, fmt, target, replicas)


def compile_text(mlir_text: str, target: str = "trn2") -> bytes:
  """Compiles StableHLO/MLIR text (tests, tools)."""
  return _compile(mlir_text.encode("utf-8"), "mlir", target)
