"""The compiler's back end: the named stages between lowering (codegen) and serialization, in
order, like `pipeline.PASSES` for the IR. Each stage is one file whose docstring says what it
requires and ensures; `pipeline.run_backend` runs them (TRN_DUMP_IR dumps the program after each
as disassembly, TRN_VERIFY_IR=1 checks each stage's Ensures with backend/verifier.py).

A stage is `run(builder, target_spec, report)`: it rewrites the ProgramBuilder in place and may
record what it found in the compile report.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from hlo_lowering.backend import (alias_donations, assign_dma_queues, insert_semaphores, peel_loops,
                                plan_memory)
from hlo_lowering.program import ProgramBuilder
from hlo_lowering.report import CompileReport


class Stage(NamedTuple):
  name: str
  run: Callable[[ProgramBuilder, dict, CompileReport], None]


STAGES: tuple[Stage, ...] = (
    Stage("alias-donations", alias_donations.run),
    Stage("plan-memory", plan_memory.run),
    Stage("assign-dma-queues", assign_dma_queues.run),
    Stage("peel-loops", peel_loops.run),
    Stage("insert-semaphores", insert_semaphores.run),
)
