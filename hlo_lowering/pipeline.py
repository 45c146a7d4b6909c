"""The compiler's pass pipeline: an ordered list of named passes, each in hlo_lowering/passes/.

Read it top to bottom: each pass's module docstring states what it requires, what it ensures and
which pass it runs after. TRN_DUMP_IR=<dir> writes the IR after every pass to
`<dir>/<compile#>-<step>-<pass-name>.ir`; TRN_VERIFY_IR=1 runs hlo_lowering.verifier after each.
"""

from __future__ import annotations

import logging
import os
from typing import Callable, NamedTuple

from hlo_lowering import ir_printer, verifier
from hlo_lowering.ir import Module
from hlo_lowering.passes import (canonicalize, canonicalize_scatter, check_supported,
                                 decompose_batch_norm, decompose_reduce_precision,
                                 decompose_rng_bit_generator, expand_total_order_compare,
                                 fold_transpose_into_dot, fuse_elementwise, inline_calls,
                                 normalize_dot_general, strip_single_device_sharding,
                                 unroll_static_loops)

logger = logging.getLogger(__name__)


class Pass(NamedTuple):
  name: str
  run: Callable[[Module], None]


PASSES: tuple[Pass, ...] = (
    Pass("inline-calls", inline_calls.run),
    Pass("strip-single-device-sharding", strip_single_device_sharding.run),
    Pass("unroll-static-loops", unroll_static_loops.run),
    Pass("decompose-batch-norm", decompose_batch_norm.run),
    Pass("expand-total-order-compare", expand_total_order_compare.run),
    Pass("canonicalize-scatter", canonicalize_scatter.run),
    Pass("decompose-reduce-precision", decompose_reduce_precision.run),
    Pass("decompose-rng-bit-generator", decompose_rng_bit_generator.run),
    Pass("canonicalize", canonicalize.run),
    Pass("fold-transpose-into-dot", fold_transpose_into_dot.run),
    Pass("normalize-dot-general", normalize_dot_general.run),
    Pass("fuse-elementwise", fuse_elementwise.run),
    Pass("check-supported", check_supported.run),
)


def _dump(module: Module, directory: str, tag: str, step: int, name: str) -> None:
  os.makedirs(directory, exist_ok=True)
  path = os.path.join(directory, f"{tag}-{step:02d}-{name}.ir")
  with open(path, "w") as f:
    f.write(ir_printer.format_module(module))


def run_pipeline(module: Module, tag: str = "0", passes: tuple[Pass, ...] | None = None) -> Module:
  """Runs `passes` (default: PASSES, read at call time) in order on `module` (in place)."""
  passes = PASSES if passes is None else passes
  dump_dir = os.environ.get("TRN_DUMP_IR", "")
  verify = os.environ.get("TRN_VERIFY_IR", "") not in ("", "0")
  if dump_dir:
    _dump(module, dump_dir, tag, 0, "import")
  for step, p in enumerate(passes, start=1):
    logger.debug("running pass %s", p.name)
    p.run(module)
    if verify:
      verifier.verify_module(module, p.name)
    if dump_dir:
      _dump(module, dump_dir, tag, step, p.name)
  return module
