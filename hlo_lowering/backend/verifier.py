"""Program invariants checked after each back-end stage when TRN_VERIFY_IR=1: what the stage's
Ensures promises (the IR passes have hlo_lowering/verifier.py).

- plan-memory: no tile refers to a buffer; every tile lies inside its memory per partition; no
  two buffers of one memory whose live ranges meet overlap (pair by pair, from the plan the stage
  recorded in `builder.memory_plan`).
- assign-dma-queues: every instruction has a stream; a DMA's is one of the target's DMA queues,
  any other instruction's is not.
- insert-semaphores: in each block, every instruction that conflicts with an earlier instruction
  of another stream (read-after-write, write-after-read, write-after-write on overlapping memory)
  starts after it completed, through its waits, its stream's earlier instructions and what the
  instructions it waited for had waited for. Checked directly, not with the stage's own index:
  quadratic in the number of instructions that run unordered, so only under TRN_VERIFY_IR. Loops
  are checked iteration by iteration, as they run (Block.executed).
"""

from __future__ import annotations

from hlo_lowering.backend.plan_memory import capacity
from hlo_lowering.program import (MAX_STREAMS, NUM_STREAMS, Opcode, ProgramBuilder, Stream,
                                  TileAP, stream_name)
from hlo_lowering.program.instructions import accesses, regions_overlap


class ProgramVerificationError(AssertionError):
  """The program broke what a back-end stage ensures: a compiler bug in the stage named."""


def _where(builder: ProgramBuilder, index: int) -> str:
  inst = builder.instructions[index]
  debug = builder.debug_entries[inst.debug_id]
  return f"instruction {index} ({inst.opcode.name.lower()} of {debug.op or '?'} {debug.location})"


def _check_plan_memory(builder: ProgramBuilder, target_spec: dict, where: str) -> None:
  for index, inst in enumerate(builder.instructions):
    for name, value in inst.operands.items():
      if not isinstance(value, TileAP):
        continue
      if value.buffer is not None:
        raise ProgramVerificationError(f"{where}: {_where(builder, index)} operand {name} is "
                                       f"still in buffer {value.buffer}")
      if value.byte_range()[1] > capacity(value.memory, target_spec):
        raise ProgramVerificationError(f"{where}: {_where(builder, index)} operand {name} "
                                       f"{value} runs past {value.memory.name}")
  placed = list(builder.memory_plan.items())
  for i, (a, (a_address, a_first, a_last)) in enumerate(placed):
    if a_address + a.size > capacity(a.memory, target_spec):
      raise ProgramVerificationError(f"{where}: buffer {a} runs past {a.memory.name}")
    for b, (b_address, b_first, b_last) in placed[i + 1:]:
      if (a.memory == b.memory and a_first <= b_last and b_first <= a_last
          and a_address < b_address + b.size and b_address < a_address + a.size):
        raise ProgramVerificationError(f"{where}: buffers {a} and {b} overlap while both live")


def _check_dma_queues(builder: ProgramBuilder, target_spec: dict, where: str) -> None:
  queues = range(Stream.DMA0, Stream.DMA0 + int(target_spec["dma_queues"]))
  for index, inst in enumerate(builder.instructions):
    if inst.stream is None:
      raise ProgramVerificationError(f"{where}: {_where(builder, index)} has no stream")
    if (inst.opcode == Opcode.DMA_COPY) != (inst.stream % NUM_STREAMS in queues):
      raise ProgramVerificationError(f"{where}: {_where(builder, index)} is on stream "
                                     f"{stream_name(inst.stream)}")


def _conflict(x, y) -> bool:
  (x_reads, x_writes), (y_reads, y_writes) = x, y
  return (any(regions_overlap(w, r) for w in x_writes for r in y_reads + y_writes)
          or any(regions_overlap(r, w) for r in x_reads for w in y_writes))


def _check_block_order(block, where: str) -> None:
  # stream -> [(accesses, done, known)] in order: the instruction's reads and writes, the
  # completed counts guaranteed once it completed, and once it started.
  by_stream: dict[int, list] = {}
  for inst in block.executed():
    own = by_stream.setdefault(inst.stream, [])
    # Completed counts of every stream guaranteed when `inst` starts.
    known = list(own[-1][2]) if own else [0] * MAX_STREAMS
    for stream, count in inst.waits:
      if count == 0 and inst.loop is not None and stream != inst.stream:
        continue  # an affine wait at an iteration before the first one it orders: nothing yet
      if stream == inst.stream or not 1 <= count <= len(by_stream.get(stream, ())):
        raise ProgramVerificationError(
            f"{where}: {inst.opcode.name.lower()} #{len(own) + 1} of stream "
            f"{stream_name(inst.stream)} waits for {stream_name(stream)}>={count}, not an "
            f"earlier instruction of another stream")
      done = by_stream[stream][count - 1][1]
      known = [max(k, d) for k, d in zip(known, done)]
    mine = accesses(inst)
    for stream, earlier in by_stream.items():
      if stream == inst.stream:
        continue
      for position in range(known[stream], len(earlier)):
        if _conflict(earlier[position][0], mine):
          raise ProgramVerificationError(
              f"{where}: {inst.opcode.name.lower()} #{len(own) + 1} of stream "
              f"{stream_name(inst.stream)} conflicts with instruction #{position + 1} of stream "
              f"{stream_name(stream)} and is not ordered after it")
    done = list(known)
    done[inst.stream] = len(own) + 1
    own.append((mine, done, known))


def _check_semaphores(builder: ProgramBuilder, where: str) -> None:
  for index, block in enumerate(builder.blocks):
    _check_block_order(block, f"{where}, block {index}")


def verify_program(builder: ProgramBuilder, after_stage: str, target_spec: dict) -> None:
  """Checks what `after_stage` ensures (nothing for a stage this verifier does not know)."""
  where = f"program after stage '{after_stage}'"
  if after_stage == "plan-memory":
    _check_plan_memory(builder, target_spec, where)
  elif after_stage == "assign-dma-queues":
    _check_dma_queues(builder, target_spec, where)
  elif after_stage == "insert-semaphores":
    _check_semaphores(builder, where)
