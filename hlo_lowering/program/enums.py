"""The numbered vocabularies of the program format (docs/program-format.md): dtypes, streams,
ALU ops, memories, tensor kinds and opcodes."""

import enum

import ml_dtypes
import numpy as np


class DType(enum.IntEnum):
  """Element types; the codes are PJRT_Buffer_Type's."""
  PRED = 1
  S8 = 2
  S16 = 3
  S32 = 4
  S64 = 5
  U8 = 6
  U16 = 7
  U32 = 8
  U64 = 9
  F16 = 10
  F32 = 11
  F64 = 12
  BF16 = 13
  F8E5M2 = 16
  F8E4M3FN = 17

  @property
  def numpy(self) -> np.dtype:
    return _NUMPY[self]

  @property
  def itemsize(self) -> int:
    return _NUMPY[self].itemsize

  @property
  def is_float(self) -> bool:
    return self in _FLOATS

  @property
  def is_signed_int(self) -> bool:
    return self in (DType.S8, DType.S16, DType.S32, DType.S64)

  @property
  def is_unsigned_int(self) -> bool:
    """Unsigned integers and pred: they compute in the unsigned 64-bit domain."""
    return self in (DType.PRED, DType.U8, DType.U16, DType.U32, DType.U64)

  @classmethod
  def from_numpy(cls, dtype) -> "DType":
    dtype = np.dtype(dtype)
    for code, np_dtype in _NUMPY.items():
      if np_dtype == dtype:
        return code
    raise ValueError(f"dtype {dtype} has no program-format code")


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
    DType.F8E5M2: np.dtype(ml_dtypes.float8_e5m2),
    DType.F8E4M3FN: np.dtype(ml_dtypes.float8_e4m3fn),
}

_FLOATS = frozenset({DType.F16, DType.F32, DType.F64, DType.BF16, DType.F8E5M2,
                     DType.F8E4M3FN})


class Stream(enum.IntEnum):
  """Instruction streams: the four compute engines, the Sync engine and 16 DMA queues."""
  SP = 0
  ACT = 1
  PE = 2
  DVE = 3
  POOL = 4
  DMA0 = 5

  @classmethod
  def dma(cls, queue: int) -> int:
    if not 0 <= queue < NUM_DMA_QUEUES:
      raise ValueError(f"DMA queue {queue} out of range 0..{NUM_DMA_QUEUES - 1}")
    return cls.DMA0 + queue


NUM_DMA_QUEUES = 16
NUM_STREAMS = Stream.DMA0 + NUM_DMA_QUEUES


def stream_name(stream: int) -> str:
  if stream >= Stream.DMA0:
    return f"DMA{stream - Stream.DMA0}"
  return Stream(stream).name


class Alu(enum.IntEnum):
  """The ALU op table shared by VectorE, ScalarE and GpSimd."""
  COPY = 0
  NEG = 1
  ABS = 2
  EXP = 3
  EXPM1 = 4
  LOG = 5
  LOG1P = 6
  TANH = 7
  LOGISTIC = 8
  SQRT = 9
  RSQRT = 10
  CBRT = 11
  SIN = 12
  COS = 13
  TAN = 14
  FLOOR = 15
  CEIL = 16
  ROUND_NEAREST_EVEN = 17
  ROUND_NEAREST_AFZ = 18
  SIGN = 19
  NOT = 20
  POPCNT = 21
  CLZ = 22
  IS_FINITE = 23
  RECIPROCAL = 24
  ERF = 25
  ADD = 32
  SUB = 33
  MUL = 34
  DIV = 35
  REM = 36
  MAX = 37
  MIN = 38
  POW = 39
  ATAN2 = 40
  AND = 41
  OR = 42
  XOR = 43
  SHIFT_LEFT = 44
  SHIFT_RIGHT_LOGICAL = 45
  SHIFT_RIGHT_ARITHMETIC = 46
  EQ = 48
  NE = 49
  LT = 50
  LE = 51
  GT = 52
  GE = 53
  SELECT = 64
  CLAMP = 65

  @property
  def arity(self) -> int:
    if self < 32:
      return 1
    if self < 64:
      return 2
    return 3

  @property
  def is_compare(self) -> bool:
    return Alu.EQ <= self <= Alu.GE

  @property
  def is_integer_only(self) -> bool:
    return self in _INTEGER_ONLY

  @property
  def is_float_only(self) -> bool:
    return self in _FLOAT_ONLY


_INTEGER_ONLY = frozenset({Alu.NOT, Alu.POPCNT, Alu.CLZ, Alu.AND, Alu.OR, Alu.XOR, Alu.SHIFT_LEFT,
                           Alu.SHIFT_RIGHT_LOGICAL, Alu.SHIFT_RIGHT_ARITHMETIC})
_FLOAT_ONLY = frozenset({Alu.EXP, Alu.EXPM1, Alu.LOG, Alu.LOG1P, Alu.TANH, Alu.LOGISTIC, Alu.SQRT,
                         Alu.RSQRT, Alu.CBRT, Alu.SIN, Alu.COS, Alu.TAN, Alu.FLOOR, Alu.CEIL,
                         Alu.ROUND_NEAREST_EVEN, Alu.ROUND_NEAREST_AFZ, Alu.IS_FINITE,
                         Alu.RECIPROCAL, Alu.ERF, Alu.ATAN2})

REDUCE_OPS = frozenset({Alu.ADD, Alu.MAX, Alu.MIN, Alu.MUL, Alu.AND, Alu.OR, Alu.XOR})
# gp_scatter combines an update with the element it lands on by one of these (copy: replace).
SCATTER_OPS = frozenset({Alu.COPY, Alu.ADD, Alu.MAX, Alu.MIN, Alu.MUL})
# gp_scatter's bounds modes, and gp_sort's float key orders (docs/program-format.md).
SCATTER_SKIP_OUT_OF_BOUNDS = 0
SCATTER_CLAMP = 1
SORT_FLOAT_TOTAL_ORDER = 0
SORT_FLOAT_CANONICAL = 1
# gp_arg_reduce body: 0 JAX's argmax/argmin comparator; 1 XLA's select form (torch_xla), which
# keeps the accumulator on >= / <= and takes the smaller index of equal values.
ARG_REDUCE_SELECT = 1
# gp_select_and_scatter's selectors: keep the current pick while select(current, candidate).
WINDOW_SELECT_OPS = frozenset({Alu.GE, Alu.GT, Alu.LE, Alu.LT})


class Memory(enum.IntEnum):
  """On-chip memories a TileAP addresses."""
  SBUF = 1
  PSUM = 2


class TensorKind(enum.IntEnum):
  PARAMETER = 0
  OUTPUT = 1
  TEMPORARY = 2
  CONSTANT = 3


class Opcode(enum.IntEnum):
  DMA_COPY = 1
  MATMUL = 16
  TRANSPOSE = 17
  TENSOR_TENSOR = 32
  TENSOR_SCALAR = 33
  TENSOR_REDUCE = 34
  TENSOR_COPY = 35
  TENSOR_TERNARY = 36
  TENSOR_UNARY = 37
  ACTIVATION = 48
  GP_ELEMENTWISE = 64
  GP_COPY = 65
  GP_FILL = 66
  GP_IOTA = 67
  GP_BITCAST = 68
  GP_REDUCE = 69
  GP_BATCH_MATMUL = 70
  GP_GATHER = 71
  GP_SCATTER = 72
  GP_ARG_REDUCE = 73
  GP_SORT = 74
  GP_REDUCE_WINDOW = 90
  GP_SELECT_AND_SCATTER = 91
  GP_CONVOLUTION = 80


class ControlOp(enum.IntEnum):
  """Block exits: SP's control instruction that ends a block (docs/program-format.md "Blocks and
  control flow"). They never appear inside a stream."""
  END = 0
  JUMP = 8
  BRANCH = 9
  SWITCH = 10


PARTITIONS = 128
PSUM_BANK_BYTES = 2048
PSUM_BANKS = 8
PSUM_BYTES_PER_PARTITION = PSUM_BANK_BYTES * PSUM_BANKS
