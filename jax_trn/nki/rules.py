"""The NeuronCore's rules, checked while a kernel is traced so the error names the kernel line
(shared/design/neuroncore.md): partition dim and partition-start alignment, PSUM bank and
free-size limits, engine/memory/dtype combinations and TensorE operand shapes. SBUF and PSUM
capacity are the allocator's (allocate.py). The program loader checks the instructions again.
"""

from __future__ import annotations

import numpy as np

from jax_trn.nki.errors import kernel_error
from jax_trn.nki.tensors import PSUM, SBUF, NkiTensor

_TILE_DTYPES = frozenset(np.dtype(d) for d in (
    "bool", "int8", "int16", "int32", "uint8", "uint16", "uint32", "float16", "float32"))
_MATMUL_FLOATS = ("float16", "float32", "bfloat16", "float8_e4m3fn", "float8_e5m2")


def _tile_dtype_ok(dtype: np.dtype) -> bool:
  return dtype in _TILE_DTYPES or dtype.name in _MATMUL_FLOATS


def is_float(dtype: np.dtype) -> bool:
  """A float dtype (fp32, fp16, bf16, fp8): engines compute it in fp32."""
  return dtype.kind == "f" or dtype.name in _MATMUL_FLOATS


def check_new_tile(trace, buffer: str, shape: tuple, dtype: np.dtype) -> None:
  partitions = int(trace.spec["partitions"])
  if len(shape) < 1 or any(d <= 0 for d in shape):
    raise kernel_error(f"on-chip tensor shape {shape}: every dim must be positive")
  if shape[0] > partitions:
    raise kernel_error(f"partition dim {shape[0]} of {buffer} tensor {shape} exceeds the "
                       f"{partitions} partitions (dim 0 is the partition dim: tile the data)")
  if not _tile_dtype_ok(dtype):
    raise kernel_error(f"dtype {dtype} cannot live in {buffer} (supported: "
                       f"{', '.join(sorted({d.name for d in _TILE_DTYPES} | set(_MATMUL_FLOATS)))})")
  size = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
  if buffer == PSUM:
    bytes_ = int(trace.spec["psum_bank_bytes"]) * int(trace.spec["psum_banks"])
    if size > bytes_:
      raise kernel_error(f"PSUM tensor {shape} {dtype} needs {size} bytes per partition; PSUM "
                         f"holds {bytes_}")
  elif size > int(trace.spec["sbuf_bytes_per_partition"]):
    raise kernel_error(f"SBUF tensor {shape} {dtype} needs {size} bytes per partition; SBUF "
                       f"holds {trace.spec['sbuf_bytes_per_partition']} on {trace.spec['name']}")


def partition_start_ok(start: int, count: int) -> bool:
  if count > 64:
    return start == 0
  if count > 32:
    return start in (0, 64)
  return start in (0, 32, 64, 96)


def tile(x, what: str, memories=(SBUF, PSUM)) -> NkiTensor:
  """`x` as an on-chip operand of an instruction: in one of `memories`, with a legal
  partition start."""
  if not isinstance(x, NkiTensor):
    raise kernel_error(f"{what} must be a tensor, got {type(x).__name__}")
  if x.buffer not in memories:
    where = " or ".join(m.upper() for m in memories)
    raise kernel_error(f"{what} must be in {where}, got {x.describe()}")
  start, count = x.partition_offset, x.shape[0]
  if not partition_start_ok(start, count):
    raise kernel_error(f"{what} {x.describe()} starts at partition {start}: a tile of {count} "
                       "partitions must start at " + ("0" if count > 64 else "0 or 64"
                                                      if count > 32 else "0, 32, 64 or 96"))
  return x


def same_partitions(what: str, *tensors: NkiTensor) -> None:
  counts = {t.shape[0] for t in tensors}
  if len(counts) > 1:
    raise kernel_error(f"{what}: operands span different partition counts "
                       f"{[t.shape for t in tensors]}")


def same_elements(what: str, a: NkiTensor, b: NkiTensor) -> None:
  """Operands that pair element by element must have the same shape (size-1 dims aside)."""
  def squeeze(s):
    return tuple(d for d in s if d != 1)
  if squeeze(a.shape) != squeeze(b.shape):
    raise kernel_error(f"{what}: shapes {a.shape} and {b.shape} differ")


def not_both_psum(what: str, *tensors: NkiTensor) -> None:
  if sum(t.buffer == PSUM for t in tensors) > 1:
    raise kernel_error(f"{what}: at most one input may be in PSUM (VectorE reads one PSUM "
                       "operand per instruction)")


def float_data(what: str, x: NkiTensor) -> None:
  if not is_float(x.dtype):
    raise kernel_error(f"{what} needs float data, got {x.describe()}")


def matmul(trace, dst: NkiTensor, stationary: NkiTensor, moving: NkiTensor) -> None:
  tile(stationary, "nc_matmul stationary", (SBUF,))
  tile(moving, "nc_matmul moving", (SBUF,))
  tile(dst, "nc_matmul dst", (PSUM,))
  for name, t in (("stationary", stationary), ("moving", moving)):
    if t.dtype.name not in _MATMUL_FLOATS:
      raise kernel_error(f"nc_matmul {name} {t.describe()}: TensorE multiplies "
                         f"{', '.join(_MATMUL_FLOATS)}")
    if t.ndim != 2:
      raise kernel_error(f"nc_matmul {name} {t.describe()} must be 2-d [K, free]")
  if dst.dtype != np.float32:
    raise kernel_error(f"nc_matmul dst {dst.describe()} must be float32 (PSUM accumulates fp32)")
  k, m = stationary.shape
  k2, n = moving.shape
  stationary_max = int(trace.spec["matmul_stationary_free_max"])
  moving_max = int(trace.spec["matmul_moving_free_max"])
  if k != k2:
    raise kernel_error(f"nc_matmul: stationary {stationary.shape} and moving {moving.shape} "
                       "contract different partition counts")
  if m > stationary_max:
    raise kernel_error(f"nc_matmul: stationary free size {m} exceeds {stationary_max} "
                       f"(stationary {stationary.shape})")
  if n > moving_max:
    raise kernel_error(f"nc_matmul: moving free size {n} exceeds {moving_max} "
                       f"(moving {moving.shape})")
  if dst.ndim != 2 or dst.shape != (m, n):
    raise kernel_error(f"nc_matmul dst {dst.shape} must be [{m}, {n}] (stationary free, moving "
                       "free)")
  bank = int(trace.spec["psum_bank_bytes"])
  low, high = dst.offset * 4, (dst.offset + n) * 4
  if low // bank != (high - 1) // bank:
    raise kernel_error(f"nc_matmul dst {dst.describe()} crosses a PSUM bank boundary (a "
                       f"matmul writes one {bank}-byte bank per partition)")


def transpose(dst: NkiTensor, data: NkiTensor) -> None:
  tile(data, "nc_transpose data", (SBUF,))
  tile(dst, "nc_transpose dst", (PSUM,))
  if data.ndim != 2 or data.shape[1] > 128:
    raise kernel_error(f"nc_transpose data {data.describe()} must be [P <= 128, F <= 128]")
  if dst.shape != (data.shape[1], data.shape[0]):
    raise kernel_error(f"nc_transpose dst {dst.shape} must be {(data.shape[1], data.shape[0])}")


def dma(dst: NkiTensor, src: NkiTensor) -> None:
  for name, t in (("dst", dst), ("src", src)):
    if not isinstance(t, NkiTensor):
      raise kernel_error(f"dma_copy {name} must be a tensor, got {type(t).__name__}")
    if t.buffer == PSUM:
      raise kernel_error(f"dma_copy {name} {t.describe()}: PSUM is not a DMA endpoint (copy it "
                         "to SBUF with nisa.tensor_copy first)")
    if t.buffer == SBUF:
      tile(t, f"dma_copy {name}", (SBUF,))
  same_elements("dma_copy", dst, src)
