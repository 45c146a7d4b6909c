"""The numbered vocabularies of the program format (docs/program-format.md): dtypes, streams,
ALU ops, memories, tensor and operand kinds, opcodes. Their names and codes come from
isa_table.py, generated from pjrt_plugin/sim/isa.def (the definition C++ includes too); this
module adds the Python-side queries."""

import enum

import ml_dtypes
import numpy as np

from . import isa_table


def _codes(table: dict) -> dict:
  return {name: row["code"] for name, row in table.items()}


def _make(base: type, name: str, table: dict):
  """The IntEnum `name` with `table`'s members and `base`'s methods."""
  return base(name, _codes(table), module=__name__, qualname=name)


class _DType(enum.IntEnum):
  """Element types; the codes are PJRT_Buffer_Type's."""
  @property
  def numpy(self) -> np.dtype:
    return _NUMPY[self]

  @property
  def itemsize(self) -> int:
    return _NUMPY[self].itemsize

  @property
  def is_float(self) -> bool:
    return isa_table.DTYPES[self.name]["cls"] == "float"

  @property
  def is_signed_int(self) -> bool:
    return isa_table.DTYPES[self.name]["cls"] == "signed"

  @property
  def is_unsigned_int(self) -> bool:
    """Unsigned integers and pred: they compute in the unsigned 64-bit domain."""
    return isa_table.DTYPES[self.name]["cls"] == "unsigned"

  @classmethod
  def from_numpy(cls, dtype) -> "DType":
    dtype = np.dtype(dtype)
    for code, np_dtype in _NUMPY.items():
      if np_dtype == dtype:
        return code
    raise ValueError(f"dtype {dtype} has no program-format code")


DType = _make(_DType, "DType", isa_table.DTYPES)

_NUMPY = {
    DType.PRED: np.dtype(np.bool_),
    DType.S8: np.dtype(np.int8),
    DType.S16: np.dtype(np.int16),
    DType.S32: np.dtype(np.int32),
    DType.S64: np.dtype(np.int64),
    DType.U8: np.dtype(np.uint8),
    DType.U16: np.dtype(np.uint16),
    DType.U32: np.dtype(np.uint32),
    DType.U64: np.dtype(np.uint64),
    DType.F16: np.dtype(np.float16),
    DType.F32: np.dtype(np.float32),
    DType.F64: np.dtype(np.float64),
    DType.BF16: np.dtype(ml_dtypes.bfloat16),
    DType.C64: np.dtype(np.complex64),
    DType.F8E5M2: np.dtype(ml_dtypes.float8_e5m2),
    DType.F8E4M3FN: np.dtype(ml_dtypes.float8_e4m3fn),
    # One value per byte (the tensor table's s4/u4: parameters and outputs only).
    DType.S4: np.dtype(ml_dtypes.int4),
    DType.U4: np.dtype(ml_dtypes.uint4),
}


class _Stream(enum.IntEnum):
  """Instruction streams: the four compute engines, the Sync engine, then the DMA queues' streams
  from DMA0 on."""

  @classmethod
  def dma(cls, queue: int) -> int:
    if not 0 <= queue < NUM_DMA_STREAMS:
      raise ValueError(f"DMA queue {queue} out of range 0..{NUM_DMA_STREAMS - 1}")
    return cls.DMA0 + queue


Stream = _make(_Stream, "Stream", {**isa_table.ENGINE_STREAMS,
                                   "DMA0": {"code": isa_table.FIRST_DMA_STREAM}})
NUM_DMA_STREAMS = isa_table.NUM_DMA_STREAMS
NUM_STREAMS = isa_table.FIRST_DMA_STREAM + NUM_DMA_STREAMS  # streams of one physical core
# A program may run on MAX_CORES physical cores (an LNC=2 device's pair, format version 6): core
# c's stream s has id c * NUM_STREAMS + s.
MAX_CORES = isa_table.MAX_CORES
MAX_STREAMS = MAX_CORES * NUM_STREAMS


def core_of(stream: int) -> int:
  """The physical core a stream id belongs to."""
  return stream // NUM_STREAMS


def on_core(stream: int, core: int) -> int:
  """Stream `stream` (of core 0) on physical core `core`."""
  return core * NUM_STREAMS + stream % NUM_STREAMS


def stream_name(stream: int) -> str:
  """"PE", "DMA3"; core 1's streams "PE@1", "DMA3@1" (the runtime's StreamName)."""
  if stream >= NUM_STREAMS:
    return f"{stream_name(stream % NUM_STREAMS)}@{core_of(stream)}"
  if stream >= Stream.DMA0:
    return f"DMA{stream - Stream.DMA0}"
  return Stream(stream).name


class _Alu(enum.IntEnum):
  """The ALU op table shared by VectorE, ScalarE and GpSimd."""

  @property
  def arity(self) -> int:
    return isa_table.ALU_OPS[self.name]["arity"]

  @property
  def is_compare(self) -> bool:
    return Alu.EQ <= self <= Alu.GE

  @property
  def is_integer_only(self) -> bool:
    return isa_table.ALU_OPS[self.name]["data"] == "int"

  @property
  def is_float_only(self) -> bool:
    return isa_table.ALU_OPS[self.name]["data"] == "float"


Alu = _make(_Alu, "Alu", isa_table.ALU_OPS)

REDUCE_OPS = frozenset({Alu.ADD, Alu.MAX, Alu.MIN, Alu.MUL, Alu.AND, Alu.OR, Alu.XOR})
# gp_scatter combines an update with the element it lands on by one of these (copy: replace).
SCATTER_OPS = frozenset({Alu.COPY, Alu.ADD, Alu.MAX, Alu.MIN, Alu.MUL})
# gp_scatter's bounds modes, gp_sort's float key orders, gp_arg_reduce's bodies and matmul's
# flags bits (docs/program-format.md). XLA's select form of arg-reduce (torch_xla) keeps the
# accumulator on >= / <= and takes the smaller index of equal values.
SCATTER_SKIP_OUT_OF_BOUNDS = isa_table.SCATTER_SKIP_OUT_OF_BOUNDS
SCATTER_CLAMP = isa_table.SCATTER_CLAMP
SORT_FLOAT_TOTAL_ORDER = isa_table.SORT_FLOAT_TOTAL_ORDER
SORT_FLOAT_CANONICAL = isa_table.SORT_FLOAT_CANONICAL
ARG_REDUCE_COMPARATOR = isa_table.ARG_REDUCE_COMPARATOR
ARG_REDUCE_SELECT = isa_table.ARG_REDUCE_SELECT
MATMUL_START = isa_table.MATMUL_START
# A region program step's codes besides the ALU ops (docs/program-format.md, "Region programs").
REGION_CONSTANT = isa_table.REGION_CONSTANT
REGION_BITCAST = isa_table.REGION_BITCAST
MATMUL_STOP = isa_table.MATMUL_STOP
# collective's kinds (docs/multi-device.md).
COLLECTIVE_ALL_REDUCE = isa_table.COLLECTIVE_ALL_REDUCE
COLLECTIVE_ALL_GATHER = isa_table.COLLECTIVE_ALL_GATHER
COLLECTIVE_REDUCE_SCATTER = isa_table.COLLECTIVE_REDUCE_SCATTER
COLLECTIVE_ALL_TO_ALL = isa_table.COLLECTIVE_ALL_TO_ALL
COLLECTIVE_PERMUTE = isa_table.COLLECTIVE_PERMUTE
COLLECTIVE_BROADCAST = isa_table.COLLECTIVE_BROADCAST
# collective's algorithms (choose-collective-algorithm; the interconnect timing charges them).
COLLECTIVE_RING = isa_table.COLLECTIVE_RING
COLLECTIVE_HALVING_DOUBLING = isa_table.COLLECTIVE_HALVING_DOUBLING
COLLECTIVE_HIERARCHICAL = isa_table.COLLECTIVE_HIERARCHICAL
# gp_select_and_scatter's selectors: keep the current pick while select(current, candidate).
WINDOW_SELECT_OPS = frozenset({Alu.GE, Alu.GT, Alu.LE, Alu.LT})


# The on-chip memories a TileAP addresses.
Memory = _make(enum.IntEnum, "Memory", isa_table.MEMORIES)
TensorKind = _make(enum.IntEnum, "TensorKind", isa_table.TENSOR_KINDS)
Opcode = _make(enum.IntEnum, "Opcode", isa_table.OPCODES)
# Block exits: SP's control instruction that ends a block (docs/program-format.md "Blocks and
# control flow"). They never appear inside a stream.
ControlOp = _make(enum.IntEnum, "ControlOp", isa_table.CONTROL_OPS)
# Operand kind tags: a DMA endpoint is HBM or a tile; a scalar operand an immediate or a tile.
EndpointKind = _make(enum.IntEnum, "EndpointKind", isa_table.ENDPOINT_KINDS)
ScalarKind = _make(enum.IntEnum, "ScalarKind", isa_table.SCALAR_KINDS)
# What activation_reduce sums into dst_sum: nothing, dst as written, or the activated fp32 values.
RowSum = _make(enum.IntEnum, "RowSum", isa_table.ROW_SUMS)
