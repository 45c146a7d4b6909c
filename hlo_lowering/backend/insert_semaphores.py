"""insert-semaphores: derives every instruction's semaphore waits from the memory it touches.

Requires: plan-memory (tiles at absolute offsets) and assign-dma-queues (every instruction has
its stream) have run.
Ensures: every instruction's `waits` orders it after each earlier instruction of another stream
of its block that it conflicts with (read-after-write, write-after-read, write-after-write on
overlapping memory), directly or through a chain of waits; no wait that one of its stream's
earlier waits or a waited-for instruction's own waits already implies (wait_tracker.py).

Each block has its own semaphore counts (they restart at 0 on entry), so each block's
instructions are walked in program order with a tracker of its own.
"""

from __future__ import annotations

from hlo_lowering.backend.wait_tracker import WaitTracker
from hlo_lowering.program import ProgramBuilder
from hlo_lowering.program.instructions import accesses
from hlo_lowering.report import CompileReport


def run(builder: ProgramBuilder, target_spec: dict, report: CompileReport) -> None:
  for block in builder.blocks:
    tracker = WaitTracker()
    for inst in block.instructions:
      reads, writes = accesses(inst)
      inst.waits = tracker.add(inst.stream, reads, writes)
