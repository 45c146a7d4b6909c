"""assign-dma-queues: gives every DMA without a queue its queue, round robin in program order.

Requires: lowering done (DMAs emitted by `LoweringContext.dma` have no queue, `stream` None).
Ensures: every instruction has a stream; every DMA's stream is one of the target's
`dma_queues` queues of the physical core it runs on (`Instruction.core`). Independent transfers
land on different queues and run in parallel.

The round robin runs over the whole program in the order lowering emitted its instructions
(blocks included), as one counter per physical core and compilation; a DMA that already has a queue (a
hand-written program) keeps it and does not advance the counter. A counted loop's DMAs get their
queues once (every iteration runs on the same streams) and the counter then moves on as if every
iteration had taken its own: the DMAs after the loop get the queues of the unrolled program's, and
a lowering rule whose body takes a multiple of the queue count per iteration gets exactly them.
"""

from __future__ import annotations

from hlo_lowering.program import Opcode, ProgramBuilder, Stream, on_core
from hlo_lowering.report import CompileReport


def run(builder: ProgramBuilder, target_spec: dict, report: CompileReport) -> None:
  queues = int(target_spec["dma_queues"])
  queue = [0] * builder.cores  # per physical core
  insts = builder.instructions
  in_loop = 0  # queues taken by the current loop's body (a loop stays on one core)
  for k, inst in enumerate(insts):
    if inst.opcode == Opcode.DMA_COPY and inst.stream is None:
      inst.stream = on_core(Stream.dma(queue[inst.core]), inst.core)
      queue[inst.core] = (queue[inst.core] + 1) % queues
      in_loop += inst.loop is not None
    if inst.loop is not None and (k + 1 == len(insts) or insts[k + 1].loop is not inst.loop):
      queue[inst.core] = (queue[inst.core] + (inst.loop.count - 1) * in_loop) % queues
      in_loop = 0
