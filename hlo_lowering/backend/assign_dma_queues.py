"""assign-dma-queues: gives every DMA without a queue its queue, round robin in program order.

Requires: lowering done (DMAs emitted by `LoweringContext.dma` have no queue, `stream` None).
Ensures: every instruction has a stream; every DMA's stream is one of the target's
`dma_queues` queues of the physical core it runs on (`Instruction.core`). Independent transfers
land on different queues and run in parallel.

The round robin runs over the whole program in the order lowering emitted its instructions
(blocks included), as one counter per physical core and compilation; a DMA that already has a
queue (a hand-written program) keeps it and does not advance the counter. A counted loop's DMAs get their
queues once (every iteration runs on the same streams) and the counter then moves on as if every
iteration had taken its own: the DMAs after the loop get the queues of the unrolled program's, and
a lowering rule whose body takes a multiple of the queue count per iteration gets exactly them.
A nested loop counts in its enclosing loop's body once per iteration.
"""

from __future__ import annotations

from hlo_lowering.program import Opcode, ProgramBuilder, Stream, on_core
from hlo_lowering.report import CompileReport


def run(builder: ProgramBuilder, target_spec: dict, report: CompileReport) -> None:
  queues = int(target_spec["dma_queues"])
  queue = [0] * builder.cores  # per physical core
  insts = builder.instructions
  taken = {}  # Loop -> queues one iteration of its body takes (its nested loops' every iteration)
  for k, inst in enumerate(insts):
    if inst.opcode == Opcode.DMA_COPY and inst.stream is None:
      inst.stream = on_core(Stream.dma(queue[inst.core]), inst.core)
      queue[inst.core] = (queue[inst.core] + 1) % queues
      if inst.loop is not None:
        taken[inst.loop] = taken.get(inst.loop, 0) + 1
    chain = inst.loops()
    after = insts[k + 1].loops() if k + 1 < len(insts) else []
    # The loops ending here, innermost first (a loop stays on one core).
    for loop in reversed(chain):
      if loop in after:
        break
      body = taken.pop(loop, 0)
      queue[inst.core] = (queue[inst.core] + (loop.count - 1) * body) % queues
      if loop.parent is not None:
        taken[loop.parent] = taken.get(loop.parent, 0) + body * loop.count
