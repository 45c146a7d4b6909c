"""The compiler's entry point: a pure function from a program to a NeuronCore program.

    compile_program(code, fmt, options, target) -> (program bytes, CompileReport)

bytes → importer → pass pipeline → codegen → back-end stages → serialized NeuronCore program. The caller passes
everything the compile depends on: the program and its format, the compile options already
parsed (`CompileOptions`; the plugin's C++ bridge is their one parser) and the target description
(the per-generation figures the C++ side holds, `jax_trn._native.target_spec(name)`; an opaque
mapping handed to codegen). The compiler keeps no state between compiles: the compile
counters, the list of reports and the persistent cache are the plugin's (jax_trn/compilation.py).
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import time
from collections.abc import Mapping

from hlo_lowering import codegen, importer, option_overrides, pipeline
from hlo_lowering.errors import CompileError, UNIMPLEMENTED
from hlo_lowering.passes import narrow_float64
from hlo_lowering.passes.partition import signature
from hlo_lowering.program.enums import stream_name
from hlo_lowering.report import CompileReport

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class CompileOptions:
  """The compile options the compiler reads, as the C++ bridge parsed them from the
  CompileOptionsProto (executable_build_options.num_replicas / num_partitions, 0 when absent;
  env_option_overrides)."""
  num_replicas: int = 1
  num_partitions: int = 1
  # XLA option overrides (jit's compiler_options=): checked, then without effect here.
  option_overrides: tuple = ()


def _multi_device_error(replicas: int, partitions: int) -> CompileError:
  return CompileError(
      f"replicated and partitioned multi-device programs are not supported yet "
      f"(num_replicas={replicas}, num_partitions={partitions}); replicated programs "
      "(torch_xla, num_replicas > 1) and partitioned ones (pmap, shard_map and sharded jit, "
      "num_partitions > 1) are", UNIMPLEMENTED)


def check_options(options: CompileOptions) -> CompileOptions:
  """The options as the compile reads them (at least one replica and one partition); refuses
  programs both replicated and partitioned, and XLA option overrides XLA would refuse
  (option_overrides.py). Callers that key a cache on the options check them first, so a refused
  program is never served."""
  replicas, partitions = max(options.num_replicas, 1), max(options.num_partitions, 1)
  if partitions > 1 and replicas > 1:
    raise _multi_device_error(replicas, partitions)
  option_overrides.check(options.option_overrides)
  return CompileOptions(num_replicas=replicas, num_partitions=partitions)


def _partitioned_signature(module, partitions: int) -> str:
  args, results = module.attrs["trn.core_signature"]
  name = str(module.attrs.get("sym_name", "") or "trn_program")
  return signature.module_text(name, args, results, module.attrs["trn.parameter_shardings"],
                               module.attrs["trn.output_shardings"], partitions)


def compile_program(code: bytes, fmt: str, options: CompileOptions, target: Mapping,
                    *, dump_tag: str = "0") -> tuple[bytes, CompileReport]:
  """The NeuronCore program for `code` ("mlir" or "hlo") on `target` (a target description with
  at least "name"), and its compile report; CompileError with a user-ready message.
  `dump_tag` names the IR and program dumps of this compile (TRN_DUMP_IR)."""
  options = check_options(options)
  started = time.perf_counter()
  module = importer.import_program(code, fmt)
  # The options are authoritative for the core count the partitioner and collectives see.
  module.attrs["mhlo.num_partitions"] = options.num_partitions
  module.attrs["mhlo.num_replicas"] = options.num_replicas
  # choose-collective-algorithm's estimate of which cores share a chip (docs/multi-device.md).
  module.attrs["trn.cores_per_chip"] = (int(target.get("physical_cores_per_chip", 1)) //
                                        int(target.get("default_lnc", 1)))
  if target.get("float64") == "float32":  # the client computes float64 as float32
    module.attrs[narrow_float64.FLOAT64_ATTR] = "float32"
  target_name = str(target["name"])
  report = CompileReport(module=str(module.attrs.get("sym_name", "")), target=target_name)
  phases = report.phase_seconds
  phases["import"], started = _since(started)
  pipeline.run_pipeline(module, tag=dump_tag)
  report.float64_as_float32 = bool(module.attrs.get(narrow_float64.NARROWED_ATTR))
  if options.num_partitions > 1:
    module.source = _partitioned_signature(module, options.num_partitions)
    report.replicated_ops = list(module.attrs.get("trn.replicated_ops", []))
  phases["passes"], started = _since(started)
  builder = codegen.generate(module, target_name, target, report)
  phases["lowering"], started = _since(started)
  pipeline.run_backend(builder, target, report, tag=dump_tag)
  program = builder.serialize()
  phases["backend"], _ = _since(started)
  counts = collections.Counter(inst.stream for inst in builder.instructions)
  report.instructions_per_stream = {stream_name(s): counts[s] for s in sorted(counts)}
  return program, report


def _since(started: float) -> tuple[float, float]:
  """(seconds since `started`, now)."""
  now = time.perf_counter()
  return now - started, now
