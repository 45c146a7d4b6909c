"""The compiler's pipeline: the IR passes (`PASSES`, each in hlo_lowering/passes/), then, after
codegen, the back-end stages (`backend.STAGES`, each in hlo_lowering/backend/).

Read it top to bottom: each pass's and stage's module docstring states what it requires, what it
ensures and which pass it runs after. TRN_DUMP_IR=<dir> writes the IR after every pass to
`<dir>/<compile#>-<step>-<pass-name>.ir` and the program as lowered and after every back-end
stage, as disassembly, to `<dir>/<compile#>-<step>-<stage-name>.disasm` (the steps continue the
passes' numbering). TRN_VERIFY_IR=1 checks what each pass ensures (hlo_lowering.verifier) and
what each stage ensures (hlo_lowering.backend.verifier) after it runs.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Callable, NamedTuple

from hlo_lowering import backend, ir_printer, verifier
from hlo_lowering.backend import verifier as backend_verifier
from hlo_lowering.ir import Module
from hlo_lowering.passes.collectives import (choose_algorithm, combine_all_reduces,
                                             decompose_all_reduce, stack_tuple_all_to_all)
from hlo_lowering.passes.partition import collective_groups, spmd
from hlo_lowering.passes import (cancel_transposes, canonicalize, canonicalize_scatter,
                                 check_supported, decompose_approx_top_k,
                                 decompose_batch_norm, decompose_cholesky, decompose_complex,
                                 decompose_householder_qr, decompose_reduce_precision,
                                 decompose_rng_bit_generator, decompose_triangular_solve,
                                 eliminate_common_subexpressions, expand_index_broadcasts,
                                 expand_total_order_compare, expand_truth_reduce,
                                 fold_convert_into_reduce, fold_product_into_reduce,
                                 fold_transpose_into_dot,
                                 fuse_attention, fuse_elementwise,
                                 fuse_rows, inline_calls,
                                 narrow_float64, normalize_dot_general, pair_matmuls,
                                 simplify_unit_reduce, strip_single_device_sharding,
                                 unroll_static_loops, widen_int4)
from hlo_lowering.program import ProgramBuilder
from hlo_lowering.program.reader import Program, format_program
from hlo_lowering.report import CompileReport

logger = logging.getLogger(__name__)


class Pass(NamedTuple):
  name: str
  run: Callable[[Module], None]


PASSES: tuple[Pass, ...] = (
    Pass("decompose-approx-top-k", decompose_approx_top_k.run),
    Pass("inline-calls", inline_calls.run),
    Pass("narrow-float64", narrow_float64.run),
    Pass("widen-int4", widen_int4.run),
    Pass("expand-truth-reduce", expand_truth_reduce.run),
    Pass("stack-tuple-all-to-all", stack_tuple_all_to_all.run),
    Pass("partition-spmd", spmd.run),
    Pass("resolve-collective-groups", collective_groups.run),
    Pass("combine-all-reduces", combine_all_reduces.run),
    Pass("decompose-all-reduce", decompose_all_reduce.run),
    Pass("choose-collective-algorithm", choose_algorithm.run),
    Pass("strip-single-device-sharding", strip_single_device_sharding.run),
    Pass("decompose-complex-triangular-solve", decompose_triangular_solve.run_complex),
    Pass("decompose-complex", decompose_complex.run),
    Pass("unroll-static-loops", unroll_static_loops.run),
    Pass("decompose-cholesky", decompose_cholesky.run),
    Pass("decompose-triangular-solve", decompose_triangular_solve.run),
    Pass("decompose-householder-qr", decompose_householder_qr.run),
    Pass("decompose-batch-norm", decompose_batch_norm.run),
    Pass("expand-total-order-compare", expand_total_order_compare.run),
    Pass("canonicalize-scatter", canonicalize_scatter.run),
    Pass("decompose-reduce-precision", decompose_reduce_precision.run),
    Pass("decompose-rng-bit-generator", decompose_rng_bit_generator.run),
    Pass("cancel-transposes", cancel_transposes.run),
    Pass("canonicalize", canonicalize.run),
    Pass("fold-transpose-into-dot", fold_transpose_into_dot.run),
    Pass("normalize-dot-general", normalize_dot_general.run),
    Pass("simplify-unit-reduce", simplify_unit_reduce.run),
    Pass("expand-index-broadcasts", expand_index_broadcasts.run),
    Pass("fuse-elementwise", fuse_elementwise.run),
    Pass("fuse-rows", fuse_rows.run),
    Pass("fuse-attention", fuse_attention.run),
    Pass("pair-matmuls", pair_matmuls.run),
    Pass("eliminate-common-subexpressions", eliminate_common_subexpressions.run),
    Pass("fold-convert-into-reduce", fold_convert_into_reduce.run),
    Pass("fold-product-into-reduce", fold_product_into_reduce.run),
    Pass("check-supported", check_supported.run),
)


# The back end's first dump: the program as codegen lowered it.
LOWERED = "lowering"


def _dump(directory: str, tag: str, step: int, name: str, suffix: str, text: str) -> None:
  os.makedirs(directory, exist_ok=True)
  path = os.path.join(directory, f"{tag}-{step:02d}-{name}.{suffix}")
  with open(path, "w") as f:
    f.write(text)


def _dump_dir() -> str:
  return os.environ.get("TRN_DUMP_IR", "")


def _verify() -> bool:
  return os.environ.get("TRN_VERIFY_IR", "") not in ("", "0")


def run_pipeline(module: Module, tag: str = "0", passes: tuple[Pass, ...] | None = None) -> Module:
  """Runs `passes` (default: PASSES, read at call time) in order on `module` (in place)."""
  passes = PASSES if passes is None else passes
  dump_dir, verify = _dump_dir(), _verify()
  if dump_dir:
    _dump(dump_dir, tag, 0, "import", "ir", ir_printer.format_module(module))
  for step, p in enumerate(passes, start=1):
    logger.debug("running pass %s", p.name)
    p.run(module)
    if verify:
      verifier.verify_module(module, p.name)
    if dump_dir:
      _dump(dump_dir, tag, step, p.name, "ir", ir_printer.format_module(module))
  return module


def _disassembly(builder: ProgramBuilder) -> str:
  return format_program(Program(builder.target, builder.tensors, builder.blocks,
                                builder.debug_entries, builder.source))


def run_backend(builder: ProgramBuilder, target_spec: dict, report: CompileReport,
                tag: str = "0", stages: tuple[backend.Stage, ...] | None = None) -> ProgramBuilder:
  """Runs the back-end `stages` (default: backend.STAGES, read at call time) in order on the
  program codegen built (in place); then it can be serialized. Dump steps follow PASSES'."""
  stages = backend.STAGES if stages is None else stages
  dump_dir, verify = _dump_dir(), _verify()
  first = len(PASSES) + 1
  if dump_dir:
    _dump(dump_dir, tag, first, LOWERED, "disasm", _disassembly(builder))
  for step, stage in enumerate(stages, start=first + 1):
    logger.debug("running back-end stage %s", stage.name)
    started = time.perf_counter()
    stage.run(builder, target_spec, report)
    report.stage_seconds[stage.name] = time.perf_counter() - started
    if verify:
      backend_verifier.verify_program(builder, stage.name, target_spec)
    if dump_dir:
      _dump(dump_dir, tag, step, stage.name, "disasm", _disassembly(builder))
  return builder
