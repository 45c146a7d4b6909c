"""The back-end stages one by one on small hand-built programs (hlo_lowering/backend/), their
verifier, and TRN_DUMP_IR's program dumps after each stage."""

import pytest

import compiler_harness as harness
from hlo_lowering import backend, compiler, pipeline
from hlo_lowering.backend import (assign_dma_queues, insert_semaphores, plan_memory,
                                  verifier as backend_verifier)
from hlo_lowering.lowering.allocators import SBUF_SLOT_BYTES, PsumBanks, SbufSlots
from hlo_lowering.program import (DType, HbmAP, Memory, ProgramBuilder, Stream, TileAP,
                                  disassemble)
from hlo_lowering.program.buffers import Address
from hlo_lowering.report import CompileReport
from jax_trn import config

MATMUL = b"""
func.func public @main(%a: tensor<128x64xf32>, %b: tensor<64x32xf32>) -> tensor<128x32xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]
      : (tensor<128x64xf32>, tensor<64x32xf32>) -> tensor<128x32xf32>
  return %0 : tensor<128x32xf32>
}"""


def _compile_matmul():
  harness.native()
  return compiler.compile_program(MATMUL, "mlir", compiler.CompileOptions(),
                                  config.target_spec("trn2"), dump_tag="t")


@pytest.fixture(scope="module")
def spec():
  return harness.native().target_spec("trn2")


def _tile(address, partitions=128, free=64, memory=Memory.SBUF):
  return TileAP.dense(memory, DType.F32, 0, partitions, address, (free,))


def _copy_through(b: ProgramBuilder, address, tensor):
  """HBM -> tile -> HBM, queues left to assign-dma-queues."""
  b.dma_copy(None, _tile(address), HbmAP.dense(tensor, (128, 64)))
  b.dma_copy(None, HbmAP.dense(tensor, (128, 64)), _tile(address))


def test_stages_run_in_this_order():
  assert [s.name for s in backend.STAGES] == ["alias-donations", "plan-memory",
                                              "assign-dma-queues", "peel-loops",
                                              "insert-semaphores"]


def test_assign_dma_queues_round_robin_in_program_order_across_blocks(spec):
  b = ProgramBuilder()
  t = b.tensor("temporary", DType.F32, (128, 64))
  b.dma_copy(None, _tile(0), HbmAP.dense(t, (128, 64)))
  b.dma_copy(7, _tile(256), HbmAP.dense(t, (128, 64)))  # a chosen queue stays, uncounted
  loop = b.new_block()
  b.set_block(loop)
  for _ in range(16):
    b.dma_copy(None, _tile(0), HbmAP.dense(t, (128, 64)))
  b.set_block(0)
  b.dma_copy(None, _tile(0), HbmAP.dense(t, (128, 64)))
  assign_dma_queues.run(b, spec, CompileReport())
  assert [inst.stream - Stream.DMA0 for inst in b.instructions] == [0, 7, *range(1, 16), 0, 1]
  backend_verifier.verify_program(b, "assign-dma-queues", spec)


def test_plan_memory_rotates_slots_and_puts_an_arena_at_zero(spec):
  b = ProgramBuilder()
  t = b.tensor("temporary", DType.F32, (128, 64))
  sbuf = SbufSlots(b, spec["sbuf_bytes_per_partition"])
  psum = PsumBanks(b, spec)
  first, second = sbuf.take(), sbuf.take()
  _copy_through(b, first + 256, t)
  _copy_through(b, second, t)
  arena = sbuf.take_arena()
  _copy_through(b, arena + 3 * sbuf.slot_bytes, t)
  third = sbuf.take()  # the arena left the rotation where it was
  _copy_through(b, third, t)
  bank = psum.take()
  b.tensor_copy(_tile(sbuf.take(), partitions=1, free=8), _tile(bank, partitions=1, free=8,
                                                              memory=Memory.PSUM))
  report = CompileReport()
  plan_memory.run(b, spec, report)
  offsets = [inst.operands["dst"].byte_offset for inst in b.instructions[::2][:4]]
  assert offsets == [256, sbuf.slot_bytes, 3 * sbuf.slot_bytes, 2 * sbuf.slot_bytes]
  assert all(tile.buffer is None for inst in b.instructions for tile in inst.operands.values()
             if isinstance(tile, TileAP))
  assert report.sbuf_peak_bytes == sbuf.arena_bytes and report.psum_peak_bytes == psum.bank_bytes
  backend_verifier.verify_program(b, "plan-memory", spec)


def test_plan_memory_refuses_overlapping_live_buffers(spec):
  b = ProgramBuilder()
  t = b.tensor("temporary", DType.F32, (128, 64))
  sbuf = SbufSlots(b, spec["sbuf_bytes_per_partition"])
  held = sbuf.take()
  b.dma_copy(None, _tile(held), HbmAP.dense(t, (128, 64)))
  _copy_through(b, sbuf.take_arena(), t)  # the arena covers `held`, which is still to be read
  b.dma_copy(None, HbmAP.dense(t, (128, 64)), _tile(held))
  with pytest.raises(plan_memory.MemoryPlanError, match="overlap while both live"):
    plan_memory.run(b, spec, CompileReport())


def test_plan_memory_refuses_a_buffer_past_the_target(spec):
  b = ProgramBuilder()
  too_big = b.new_buffer(Memory.SBUF, spec["sbuf_bytes_per_partition"] + 64, "arena")
  t = b.tensor("temporary", DType.F32, (128, 64))
  b.dma_copy(None, _tile(Address(too_big)), HbmAP.dense(t, (128, 64)))
  with pytest.raises(plan_memory.MemoryPlanError, match="exceeds the .* bytes per partition"):
    plan_memory.run(b, spec, CompileReport())


def test_a_tile_must_lie_in_its_buffer(spec):
  sbuf = SbufSlots(ProgramBuilder(), spec["sbuf_bytes_per_partition"])
  with pytest.raises(ValueError, match="past the .* bytes of its buffer"):
    _tile(sbuf.take() + (sbuf.slot_bytes - 128))


def test_insert_semaphores_waits_per_block(spec):
  b = ProgramBuilder()
  t = b.tensor("temporary", DType.F32, (128, 64))
  b.dma_copy(0, _tile(0), HbmAP.dense(t, (128, 64)))
  b.tensor_copy(_tile(1024), _tile(0))
  second = b.new_block()
  b.set_block(second)
  b.tensor_copy(_tile(2048), _tile(0))  # a new block starts with every stream idle
  insert_semaphores.run(b, spec, CompileReport())
  assert [inst.waits for inst in b.instructions] == [[], [(Stream.DMA0, 1)], []]
  backend_verifier.verify_program(b, "insert-semaphores", spec)


def _scheduled_copy(spec) -> ProgramBuilder:
  b = ProgramBuilder()
  t = b.tensor("temporary", DType.F32, (128, 64))
  _copy_through(b, 0, t)
  b.tensor_copy(_tile(1024), _tile(0))
  return harness.through_backend(b)


def test_verifier_finds_a_missing_wait(spec):
  b = _scheduled_copy(spec)
  backend_verifier.verify_program(b, "insert-semaphores", spec)
  b.instructions[1].waits = []  # the store no longer waits for the load
  with pytest.raises(backend_verifier.ProgramVerificationError,
                     match="dma_copy #1 of stream DMA1 conflicts with instruction #1 of stream "
                           "DMA0"):
    backend_verifier.verify_program(b, "insert-semaphores", spec)


def test_verifier_finds_a_dma_without_queue_and_an_unplaced_tile(spec):
  b = ProgramBuilder()
  t = b.tensor("temporary", DType.F32, (128, 64))
  _copy_through(b, SbufSlots(b, spec["sbuf_bytes_per_partition"]).take(), t)
  with pytest.raises(backend_verifier.ProgramVerificationError, match="has no stream"):
    backend_verifier.verify_program(b, "assign-dma-queues", spec)
  with pytest.raises(backend_verifier.ProgramVerificationError, match="still in buffer sbuf0"):
    backend_verifier.verify_program(b, "plan-memory", spec)
  with pytest.raises(ValueError, match="has no queue"):
    b.serialize()


def test_dump_ir_writes_the_program_after_every_stage(tmp_path, monkeypatch):
  monkeypatch.setenv("TRN_DUMP_IR", str(tmp_path))
  monkeypatch.setenv("TRN_VERIFY_IR", "1")
  program, _ = _compile_matmul()
  dumps = sorted(p.name for p in tmp_path.glob("*.disasm"))
  first = len(pipeline.PASSES) + 1
  assert dumps == [f"t-{first + i:02d}-{name}.disasm" for i, name in
                   enumerate([pipeline.LOWERED] + [s.name for s in backend.STAGES])]
  lowered = (tmp_path / dumps[0]).read_text()
  assert "stream DMA?:" in lowered and "@sbuf" in lowered and "wait[" not in lowered
  assert (tmp_path / dumps[-1]).read_text() == disassemble(program)


def test_compile_report_has_on_chip_peaks():
  _, report = _compile_matmul()
  spec = harness.native().target_spec("trn2")
  # The matmul carves all of SBUF into its rings; of the PSUM banks it takes, its one output
  # tile uses one (a bank no instruction touches is never live).
  slot = SBUF_SLOT_BYTES
  assert report.sbuf_peak_bytes == spec["sbuf_bytes_per_partition"] // slot * slot
  assert report.psum_peak_bytes == spec["psum_bank_bytes"]
  assert "SBUF peak" in report.format()
