"""The program format from both sides: derived waits (the back end's insert-semaphores), reader
round trip, and the C++ loader (the one checker of every validity rule) rejecting malformed
programs with errors that name the instruction and its debug entry (and the process surviving
them)."""

import struct

import jax.numpy as jnp
import numpy as np
import pytest

import compiler_harness as harness
from hlo_lowering.backend import insert_semaphores
from hlo_lowering.program import writer
from hlo_lowering.program import (Alu, DType, HbmAP, Memory, Opcode, ProgramBuilder, Scalar,
                                  Stream, TileAP, disassemble, read_program)
from hlo_lowering.report import CompileReport

_native = pytest.importorskip("jax_trn._native")


def _sbuf(offset, partitions=128, free=(64,), dtype=DType.F32, start=0):
  return TileAP.dense(Memory.SBUF, dtype, start, partitions, offset, free)


def _copy_program():
  """x -> SBUF -> *2 -> y."""
  b = ProgramBuilder(source="module @m {}")
  x = b.tensor("parameter", DType.F32, (128, 64), index=0, name="x")
  y = b.tensor("output", DType.F32, (128, 64), index=0, name="y")
  d = b.debug("stablehlo.multiply", "jit(f)/mul", "f.py:3:4")
  b.dma_copy(0, _sbuf(0), HbmAP.dense(x, (128, 64)), debug=d)
  b.tensor_scalar(Alu.MUL, _sbuf(256), _sbuf(0), Scalar(DType.F32, 2.0), debug=d)
  b.dma_copy(1, HbmAP.dense(y, (128, 64)), _sbuf(256), debug=d)
  return harness.through_backend(b)


def test_round_trip_and_disassembly():
  b = _copy_program()
  data = b.serialize()
  program = read_program(data)
  assert program.target == "trn2" and program.source == "module @m {}"
  assert [t.name for t in program.tensors] == ["x", "y"]
  dve = program.streams[Stream.DVE]
  assert dve[0].opcode == Opcode.TENSOR_SCALAR and dve[0].waits == [(Stream.DMA0, 1)]
  assert dve[0].operands == b.streams[Stream.DVE][0].operands
  text = disassemble(data)
  assert "tensor_scalar wait[DMA0>=1]" in text and "f.py:3:4" in text
  assert program.streams[Stream.DMA0 + 1][0].waits == [(Stream.DVE, 1)]
  info = _native.program_info(data)
  assert info["parameters"] == [{"name": "x", "dtype": "f32", "shape": (128, 64)}]
  x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
  (y,), _ = _native.run_program(data, [x])
  np.testing.assert_array_equal(y, 2 * x)


def _complex_pairs_program(kind="parameter"):
  """A c64 [128, 32] parameter read as f32 [128, 32, 2]: y = 2 * its float32 parts."""
  b = ProgramBuilder(source="module @m {}")
  x = b.tensor(kind, DType.F32, (128, 32, 2), index=0, name="x", complex_pairs=True)
  y = b.tensor("output", DType.F32, (128, 64), index=0 if kind == "parameter" else 1, name="y")
  d = b.debug("stablehlo.multiply", "jit(f)/mul", "f.py:3:4")
  b.dma_copy(0, _sbuf(0), HbmAP.dense(x, (128, 64)), debug=d)
  b.tensor_scalar(Alu.MUL, _sbuf(256), _sbuf(0), Scalar(DType.F32, 2.0), debug=d)
  b.dma_copy(1, HbmAP.dense(y, (128, 64)), _sbuf(256), debug=d)
  return harness.through_backend(b)


def test_a_c64_parameter_is_bound_as_c64_and_read_as_f32_pairs():
  data = _complex_pairs_program().serialize()
  info = _native.program_info(data)
  assert info["parameters"] == [{"name": "x", "dtype": "c64", "shape": (128, 32)}]
  assert "tensor t0 'x' parameter[0] c64[128, 32] (f32 pairs)" in disassemble(data)
  assert read_program(data).tensors[0].shape == (128, 32, 2)
  x = (np.arange(128 * 32) + 1j * np.arange(128 * 32)[::-1]).astype(np.complex64).reshape(128, 32)
  (y,), _ = _native.run_program(data, [x])
  np.testing.assert_array_equal(y, 2 * x.view(np.float32))


def test_c64_is_only_a_parameters_or_outputs_type():
  with pytest.raises(ValueError, match="complex pairs are an f32"):
    _complex_pairs_program("temporary")
  data = _complex_pairs_program().serialize()
  tensor_entry = struct.pack("<BIB", 0, 0, DType.C64)  # kind parameter, index 0, dtype c64
  assert data.count(tensor_entry) == 1
  _expect_invalid(data.replace(tensor_entry, struct.pack("<BIB", 2, 0, DType.C64)),
                  "is c64 but not a parameter or an output")


def test_debug_entries_carry_the_lowering_to_the_runtime():
  """Format version 3: each debug entry says how its op was lowered and by which rule, through
  the writer, the Python reader, the disassembly and the C++ loader (what the profiler reads)."""
  b = _copy_program()
  b.debug_entries[0].lowering, b.debug_entries[0].rule = "native", "elementwise.lower_multiply"
  data = b.serialize()
  entry = read_program(data).debug[0]
  assert (entry.lowering, entry.rule) == ("native", "elementwise.lower_multiply")
  assert "# stablehlo.multiply jit(f)/mul f.py:3:4 [native elementwise.lower_multiply]" in \
      disassemble(data)
  _, profile = _native.run_program(data, [np.zeros((128, 64), np.float32)])
  assert profile["debug"][0] == {"op": "stablehlo.multiply", "name": "jit(f)/mul",
                                 "location": "f.py:3:4", "lowering": "native",
                                 "rule": "elementwise.lower_multiply"}


def test_compiled_programs_record_each_ops_lowering():
  x = np.ones((4, 8), np.float32)
  program = read_program(harness.compile_fn(lambda v: jnp.sort(jnp.exp(v) @ x.T, axis=0), x))
  kinds = {(d.op, d.lowering, d.rule) for d in program.debug if d.op.startswith("stablehlo.")}
  assert ("stablehlo.dot_general", "native", "matmul.lower_dot_general") in kinds, kinds
  assert any(op == "stablehlo.sort" and lowering == "gpsimd" and rule.startswith("gpsimd.")
             for op, lowering, rule in kinds), kinds


def test_insert_semaphores_waits_follow_regions():
  b = ProgramBuilder()
  t = b.tensor("temporary", DType.F32, (128, 64))
  u = b.tensor("temporary", DType.F32, (128, 64))
  b.dma_copy(0, _sbuf(0), HbmAP.dense(t, (128, 64)))                 # DMA0 #1 writes [0,256)
  b.dma_copy(1, _sbuf(1024), HbmAP.dense(u, (128, 64)))              # DMA1 #1 writes [1024,1280)
  b.tensor_copy(_sbuf(4096), _sbuf(1024))                             # reads only DMA1's tile
  b.tensor_copy(_sbuf(8192, partitions=32, start=32), _sbuf(0, partitions=32, start=96))
  b.dma_copy(2, _sbuf(0), HbmAP.dense(u, (128, 64)))                 # WAW with DMA0, WAR with DVE
  b.dma_copy(3, HbmAP.dense(t, (128, 64)), _sbuf(20000))              # same HBM tensor as DMA0 #1
  b.tensor_copy(_sbuf(30000), _sbuf(40000))                           # nothing touched these
  insert_semaphores.run(b, _native.target_spec(b.target), CompileReport())
  assert [inst.waits for inst in b.instructions[2:]] == [
      [(Stream.DMA0 + 1, 1)],
      [(Stream.DMA0, 1)],
      [(Stream.DVE, 2)],  # DVE #2 already waited on DMA0
      [(Stream.DMA0, 1)],
      []]


def _one_instruction(emit) -> bytes:
  """A program of one instruction, emitted by emit(builder, x, debug id) over parameter x."""
  b = ProgramBuilder()
  x = b.tensor("parameter", DType.F32, (128, 64), index=0, name="x")
  emit(b, x, b.debug("stablehlo.add", "jit(f)/add", "f.py:7:2"))
  return b.serialize()


@pytest.mark.parametrize("emit, message", [
    (lambda b, x, d: b.tensor_copy(TileAP.dense(Memory.SBUF, DType.F32, 16, 32, 0, (4,)),
                                   _sbuf(0, partitions=32, free=(4,)), debug=d),
     "starts at 0, 32, 64 or 96"),
    (lambda b, x, d: b.tensor_copy(TileAP.dense(Memory.SBUF, DType.F32, 32, 64, 0, (4,)),
                                   _sbuf(0, partitions=64, free=(4,)), debug=d),
     "starts at 0 or 64"),
    (lambda b, x, d: b.tensor_copy(TileAP.dense(Memory.SBUF, DType.F64, 0, 1, 0, (4,)),
                                   _sbuf(0, partitions=1, free=(4,)), debug=d), "f64"),
    (lambda b, x, d: b.tensor_copy(TileAP(Memory.SBUF, DType.F32, 0, 1, 0, ((-1, 4),)),
                                   _sbuf(0, partitions=1, free=(4,)), debug=d), "outside"),
])
def test_loader_rejects_bad_tiles(emit, message):
  """An operand error names its instruction, opcode and debug id (the table comes later)."""
  with pytest.raises(ValueError, match=rf"DVE instruction 0, tensor_copy, debug id 0\).*{message}"):
    _native.program_info(_one_instruction(emit))


@pytest.mark.parametrize("emit, message", [
    (lambda b, x, d: b.dma_copy(0, _sbuf(0, free=(32,)), HbmAP.dense(x, (128, 64)), debug=d),
     "dma_copy: element counts differ"),
    (lambda b, x, d: b.dma_copy(0, _sbuf(0), HbmAP.dense(x, (128, 64), offset=1), debug=d),
     "covers elements"),
    (lambda b, x, d: b.dma_copy(0, HbmAP.dense(x, (128, 64)), _sbuf(0), debug=d),
     r"DMA0 instruction 0 \(dma_copy; stablehlo.add \"jit\(f\)/add\" at f.py:7:2\): "
     r"writes parameter tensor 0 \(x\)"),
    (lambda b, x, d: b.tensor_tensor(Alu.AND, _sbuf(0), _sbuf(256), _sbuf(512), debug=d),
     r"DVE instruction 0 \(tensor_tensor; stablehlo.add \"jit\(f\)/add\" at f.py:7:2\): "
     "ALU op and needs integer data"),
    (lambda b, x, d: b.tensor_reduce(Alu.SUB, _sbuf(0, free=(1,)), _sbuf(256), debug=d),
     "sub is not a reduction"),
    (lambda b, x, d: b.dma_copy(0, TileAP.dense(Memory.PSUM, DType.F32, 0, 128, 0, (64,)),
                                HbmAP.dense(x, (128, 64)), debug=d), "PSUM is not a DMA endpoint"),
])
def test_loader_rejects_bad_instructions(emit, message):
  """A rule error names the instruction and its debug entry: StableHLO op and source line."""
  with pytest.raises(ValueError, match=message):
    _native.program_info(_one_instruction(emit))


@pytest.mark.parametrize("emit, message", [
    (lambda b: b.tensor_copy(TileAP.dense(Memory.SBUF, DType.F32, 0, 129, 0, (4,)),
                             _sbuf(0, partitions=1, free=(516,))),
     r"partitions must lie in 0\.\.127"),
    (lambda b: b.tensor_copy(TileAP.dense(Memory.PSUM, DType.F32, 0, 1, 16380, (4,)),
                             _sbuf(0, partitions=1, free=(4,))), r"PSUM .* outside \[0, 16384\)"),
    (lambda b: b.matmul(TileAP.dense(Memory.PSUM, DType.F32, 0, 64, 1024, (512,)),
                        _sbuf(0, free=(64,)), _sbuf(4096, free=(512,))), "cross a PSUM bank"),
    (lambda b: b.matmul(TileAP.dense(Memory.PSUM, DType.F32, 0, 64, 0, (1024,)),
                        _sbuf(0, free=(64,)), _sbuf(4096, free=(1024,))),
     "moving free size 1024 exceeds 512 on trn2"),
])
def test_loader_checks_the_targets_figures(emit, message):
  """Partition counts, PSUM capacity and banks, TensorE's free size limits: figures of the
  target (target_spec.cc), checked by the loader alone."""
  b = ProgramBuilder()
  emit(b)
  with pytest.raises(ValueError, match=message):
    _native.program_info(b.serialize())


def _expect_invalid(data, message):
  with pytest.raises(ValueError, match=message):
    _native.run_program(data, [np.zeros((128, 64), np.float32)])


def test_loader_rejects_malformed_bytes():
  data = _copy_program().serialize()
  for cut in (0, 5, 8, 20, len(data) // 2, len(data) - 1):
    _expect_invalid(data[:cut], "truncated|needs at least")
  _expect_invalid(b"XXXXXXXX" + data[8:], "bad magic")
  future = writer.VERSION + 1
  _expect_invalid(data[:8] + struct.pack("<I", future) + data[12:], f"version {future}")
  _expect_invalid(data + b"\0", "trailing bytes")
  # The DVE instruction's opcode/debug id pair, with an opcode the format does not define.
  marker = struct.pack("<HI", Opcode.TENSOR_SCALAR, 0)
  assert data.count(marker) == 1
  _expect_invalid(data.replace(marker, struct.pack("<HI", 99, 0)), "unknown opcode 99")
  _expect_invalid(data.replace(marker, struct.pack("<HI", Opcode.MATMUL, 0)), "does not run on")
  _expect_invalid(data.replace(marker, struct.pack("<HI", Opcode.TENSOR_SCALAR, 9)), "debug id 9")


def _mutated(operand, **fields):
  """The copy program with fields of one operand of the DVE instruction forced (past the
  builder's checks), serialized."""
  b = _copy_program()
  obj = b.streams[Stream.DVE][0].operands[operand]
  for name, value in fields.items():
    object.__setattr__(obj, name, value)
  return b.serialize()


def test_loader_checks_operands():
  _expect_invalid(_mutated("src", partition_start=64, partition_count=64 + 1),
                  "partitions must lie")
  _expect_invalid(_mutated("src", partition_start=32, partition_count=40), "starts at 0 or 64")
  _expect_invalid(_mutated("src", partition_start=16, partition_count=8), "starts at 0, 32, 64")
  _expect_invalid(_mutated("src", partition_count=0), "partitions must lie")
  _expect_invalid(_mutated("dst", byte_offset=300000), "SBUF access pattern covers bytes")
  _expect_invalid(_mutated("src", free=((1, 64), (64, 5000))), "outside")
  _expect_invalid(_mutated("src", partition_count=64), "shapes differ")
  b = _copy_program()
  dma = b.streams[Stream.DMA0][0]
  object.__setattr__(dma.operands["src"], "offset", 10)
  _expect_invalid(b.serialize(), r"covers elements \[10, 8201\] of tensor 0")


def test_deadlock_is_reported_and_process_survives():
  b = _copy_program()
  b.streams[Stream.DMA0][0].waits = [(Stream.DMA0 + 1, 1)]  # waits for the final store: a cycle
  with pytest.raises(RuntimeError, match=r"deadlock.*DMA0 instruction 0 \(dma_copy; "
                                         r"stablehlo.multiply \"jit\(f\)/mul\" at f.py:3:4\)"):
    _native.run_program(b.serialize(), [np.zeros((128, 64), np.float32)])
  b.streams[Stream.DMA0][0].waits = [(Stream.PE, 1)]  # a stream with no instructions
  with pytest.raises(RuntimeError, match=r"PE>=1 \(has 0 of 0\)"):
    _native.run_program(b.serialize(), [np.zeros((128, 64), np.float32)])
  (y,), _ = _native.run_program(_copy_program().serialize(), [np.ones((128, 64), np.float32)])
  assert (y == 2).all()


def test_wrong_inputs_are_value_errors():
  data = _copy_program().serialize()
  with pytest.raises(ValueError, match="takes 1 inputs"):
    _native.run_program(data, [])
  with pytest.raises(ValueError, match="dtype"):
    _native.run_program(data, [np.zeros((128, 64), np.float64)])
  with pytest.raises(ValueError, match="shape"):
    _native.run_program(data, [np.zeros((64, 128), np.float32)])
  with pytest.raises(ValueError, match="unknown target"):
    _native.target_spec("trn9")
