"""One definition of the instruction set: hlo_lowering/program/isa_table.py is what gen_isa makes
of pjrt_plugin/sim/isa.def today, and the Python enums built from it agree with the tables the
C++ side compiled from the same file (codes, names, dtype sizes, ALU arities, streams)."""

import pathlib

import pytest

from hlo_lowering import gen_isa
from hlo_lowering.program import enums, isa_table
from hlo_lowering.program.enums import (Alu, ControlOp, DType, EndpointKind, Memory, Opcode,
                                        RowSum, ScalarKind, Stream, TensorKind, stream_name)

_native = pytest.importorskip("jax_trn._native")


# The repository's files (an installed package has the table but not pjrt_plugin/sim/isa.def).
_REPOSITORY = pathlib.Path(__file__).resolve().parents[1]


def test_generated_table_is_current():
  committed = (_REPOSITORY / gen_isa.OUTPUT.relative_to(gen_isa.ROOT)).read_text()
  definition = (_REPOSITORY / gen_isa.DEF_FILE.relative_to(gen_isa.ROOT)).read_text()
  assert committed == gen_isa.render(definition), (
      "hlo_lowering/program/isa_table.py is stale: run `python -m hlo_lowering.gen_isa`")


@pytest.mark.parametrize("enum_type, table", [
    (DType, "dtypes"), (Alu, "alu_ops"), (Opcode, "opcodes"), (ControlOp, "control_ops"),
    (Memory, "memories"), (TensorKind, "tensor_kinds"), (EndpointKind, "endpoint_kinds"),
    (ScalarKind, "scalar_kinds"), (RowSum, "row_sums")])
def test_python_enum_matches_the_compiled_table(enum_type, table):
  native = _native.isa_tables()[table]
  assert {m.name.lower(): int(m) for m in enum_type} == native


def test_dtype_sizes_and_alu_arities_match():
  tables = _native.isa_tables()
  assert {d.name.lower(): d.itemsize for d in DType} == tables["dtype_sizes"]
  assert {op.name.lower(): op.arity for op in Alu} == tables["alu_arities"]


def test_format_constants_match():
  native = _native.isa_tables()["constants"]
  assert native == {name: getattr(isa_table, name) for name in native}
  for name in ("MATMUL_START", "MATMUL_STOP", "SCATTER_CLAMP", "SORT_FLOAT_CANONICAL",
               "ARG_REDUCE_SELECT", "NUM_DMA_STREAMS"):
    assert getattr(enums, name) == native[name]
  assert Stream.DMA0 == native["FIRST_DMA_STREAM"]


def test_streams_match():
  native = _native.isa_tables()["streams"]
  assert len(native) == enums.NUM_STREAMS
  assert {stream_name(s): s for s in range(enums.NUM_STREAMS)} == native
  assert Stream.dma(enums.NUM_DMA_STREAMS - 1) == enums.NUM_STREAMS - 1
