"""One definition of each target: the hardware figures lowering uses come from the target
description (pjrt_plugin/sim/target_spec.cc through jax_trn._native.target_spec), never from a
Python literal; a different description gives a different program, and the Python side's view
of every target agrees with the C++ table."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import compiler_harness as harness
from hlo_lowering import codegen, importer, pipeline
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.program import Memory, Opcode, ProgramBuilder, Stream, TileAP, enums
from hlo_lowering.report import CompileReport

_native = harness.native()


@pytest.mark.parametrize("name", _native.target_names())
def test_lowering_context_takes_every_figure_from_the_description(name):
  spec = _native.target_spec(name)
  ctx = LoweringContext(ProgramBuilder(spec), spec)
  assert ctx.builder.target == name
  assert ctx.partitions == spec["partitions"]
  assert (ctx.psum.bank_bytes, ctx.psum.count) == (spec["psum_bank_bytes"], spec["psum_banks"])
  assert ctx.sbuf.count * ctx.sbuf.slot_bytes <= spec["sbuf_bytes_per_partition"]
  assert _native.program_info(ctx.builder.serialize())["target"] == name


def test_unknown_target_is_refused_where_the_description_is_obtained():
  with pytest.raises(ValueError, match="expected one of trn1, trn2, trn3"):
    _native.target_spec("trn9")
  with pytest.raises(ValueError, match="unknown target"):
    _native.program_info(ProgramBuilder("trn9").serialize())


def _tiles(spec: dict, f, *args) -> list[TileAP]:
  module = importer.import_program(harness.artifact(f, *args), "mlir")
  pipeline.run_pipeline(module)
  builder = codegen.generate(module, spec["name"], spec, CompileReport())
  pipeline.run_backend(builder, spec, CompileReport())
  return [ap for inst in builder.instructions for ap in inst.operands.values()
          if isinstance(ap, TileAP)]


def test_rules_follow_the_description_not_a_literal():
  """Halving the partitions of trn2's description halves the tiles its program uses."""
  spec = _native.target_spec("trn2")
  narrow = dict(spec, partitions=64)
  x = np.ones((256, 96), np.float32)
  w = np.ones((96, 80), np.float32)

  def f(x, w):
    return jnp.tanh(x) @ w

  wide_tiles, narrow_tiles = _tiles(spec, f, x, w), _tiles(narrow, f, x, w)
  assert max(t.partition_start + t.partition_count for t in wide_tiles) == 128
  assert max(t.partition_start + t.partition_count for t in narrow_tiles) == 64
  psum_end = max(t.byte_range()[1] for t in narrow_tiles if t.memory == Memory.PSUM)
  assert psum_end <= narrow["psum_banks"] * narrow["psum_bank_bytes"]


def test_dma_queues_follow_the_description():
  """assign-dma-queues round-robins over the target's queues (within the format's streams)."""
  spec = _native.target_spec("trn2")
  assert spec["dma_queues"] <= enums.NUM_DMA_STREAMS
  few = dict(spec, dma_queues=3)
  x = jax.ShapeDtypeStruct((4096, 1024), jnp.float32)  # several tiles: several loads, stores
  module = importer.import_program(harness.artifact(jnp.tanh, x), "mlir")
  pipeline.run_pipeline(module)
  builder = codegen.generate(module, "trn2", few, CompileReport())
  pipeline.run_backend(builder, few, CompileReport())
  queues = [inst.stream - Stream.DMA0 for inst in builder.instructions
            if inst.opcode == Opcode.DMA_COPY]
  assert queues == [i % 3 for i in range(len(queues))] and len(queues) > 3
