"""A kernel that breaks a NeuronCore rule, or uses an NKI API jax_trn.nki refuses, fails while it
is traced with a KernelError naming the kernel's own source line (marked `# <- rule` below)."""

import pathlib

import numpy as np
import pytest

from jax_trn import nki
import jax_trn.nki.isa as nisa
import jax_trn.nki.language as nl

pytest.importorskip("jax_trn._native", reason="jax_trn._native is not built", exc_type=ImportError)

_SOURCE = pathlib.Path(__file__).read_text().splitlines()


def _line(marker: str) -> str:
  """'path:N' of the kernel line carrying the comment `# <- marker`."""
  [number] = [i + 1 for i, text in enumerate(_SOURCE) if text.rstrip().endswith(f"# <- {marker}")]
  return f"{__file__}:{number}"


def _fails(kernel, args, marker: str, message: str):
  with pytest.raises(nki.KernelError) as error:
    kernel.trace(*args)
  text = str(error.value)
  assert text.startswith(_line(marker)), text
  assert message in text, text


X = np.zeros((256, 64), np.float32)


def _stored(tile):
  """A kernel output holding `tile`."""
  out = nl.ndarray(tile.shape, dtype=tile.dtype, buffer=nl.shared_hbm)
  nisa.dma_copy(dst=out, src=tile)
  return out


@nki.jit
def partition_dim_too_large(x):
  big = nl.ndarray((256, 64), dtype=nl.float32, buffer=nl.sbuf)  # <- partitions
  nisa.dma_copy(dst=big, src=x)
  return x


@nki.jit
def misaligned_partition_start(x):
  tile = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
  out = nl.ndarray((40, 64), dtype=nl.float32, buffer=nl.shared_hbm)
  nisa.dma_copy(dst=tile, src=x[0:128, :])
  nisa.dma_copy(dst=out, src=tile[16:56, :])  # <- alignment
  return out


@nki.jit
def stationary_too_wide(x):
  a = nl.ndarray((128, 256), dtype=nl.bfloat16, buffer=nl.sbuf)
  b = nl.ndarray((128, 64), dtype=nl.bfloat16, buffer=nl.sbuf)
  acc = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)
  nisa.nc_matmul(dst=acc, stationary=a, moving=b)  # <- stationary
  return x


@nki.jit
def moving_too_wide(x):
  a = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
  b = nl.ndarray((128, 1024), dtype=nl.bfloat16, buffer=nl.sbuf)
  acc = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.psum)
  nisa.nc_matmul(dst=acc, stationary=a, moving=b)  # <- moving
  return x


@nki.jit
def matmul_across_banks(x):
  a = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
  b = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
  acc = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.psum)
  nisa.nc_matmul(dst=acc[:, 256:768], stationary=a, moving=b)  # <- bank
  return x


@nki.jit
def integer_matmul(x):
  a = nl.ndarray((128, 128), dtype=nl.int32, buffer=nl.sbuf)
  b = nl.ndarray((128, 128), dtype=nl.int32, buffer=nl.sbuf)
  acc = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
  nisa.nc_matmul(dst=acc, stationary=a, moving=b)  # <- dtype
  return x


@nki.jit
def psum_tensor_too_large(x):
  nl.ndarray((128, 8192), dtype=nl.float32, buffer=nl.psum)  # <- psum size
  return x


@nki.jit
def too_many_psum_banks(x):
  a = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
  nisa.memset(dst=a, value=1.0)
  accs = []
  for i in range(9):
    acc = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)  # <- psum banks
    nisa.nc_matmul(dst=acc, stationary=a, moving=a)
    accs.append(acc)
  out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
  for acc in accs:  # every accumulator is still live here
    nisa.tensor_copy(dst=out, src=acc)
  return _stored(out)


@nki.jit
def sbuf_overflow(x):
  tiles = []
  for i in range(8):
    tile = nl.ndarray((128, 8192), dtype=nl.float32, buffer=nl.sbuf)  # <- sbuf
    nisa.memset(dst=tile, value=0.0)
    tiles.append(tile)
  out = nl.ndarray((128, 8192), dtype=nl.float32, buffer=nl.sbuf)
  for tile in tiles:
    nisa.tensor_tensor(dst=out, data1=tile, data2=tile, op=nl.add)
  return _stored(out)


@nki.jit
def dma_from_psum(x):
  acc = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)
  out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
  nisa.dma_copy(dst=out, src=acc)  # <- psum dma
  return out


@nki.jit
def both_inputs_in_psum(x):
  a = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)
  b = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)
  c = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
  nisa.tensor_tensor(dst=c, data1=a, data2=b, op=nl.add)  # <- two psum
  return x


@nki.jit
def mismatched_shapes(x):
  a = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
  nisa.dma_copy(dst=a, src=x[0:128, 0:32])  # <- shapes
  return x


@nki.jit
def slices_out_of_bounds(x):
  a = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
  nisa.dma_copy(dst=a, src=x[200:328, :])  # <- bounds
  return _stored(a)


@nki.jit
def writes_its_input(x):
  a = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
  nisa.memset(dst=a, value=0.0)
  nisa.dma_copy(dst=x[0:128, :], src=a)  # <- input
  return x


@nki.jit
def reads_uninitialised_memory(x):
  a = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
  nisa.dma_copy(dst=a[:, 0:32], src=x[0:128, 0:32])
  b = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
  nisa.tensor_copy(dst=b, src=a)  # <- uninitialised
  return _stored(b)


@nki.jit
def partition_marker_not_first(x):
  nl.ndarray((4, nl.par_dim(128)), dtype=nl.float32, buffer=nl.sbuf)  # <- par_dim
  return x


@nki.jit
def prints_with_a_mask(x):
  nl.device_print("x", x, mask=x)  # <- refused
  return x


@nki.jit
def uses_a_refused_instruction(x):
  a = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
  nisa.max8(dst=a, data=a)  # <- refused isa
  return x


@nki.jit
def transposing_index(x):
  i_p, i_f = nl.mgrid[0:64, 0:128]
  return _stored(nl.load(x[i_f, i_p]))  # <- transposing


@nki.jit
def combined_index_vectors(x):
  i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
  return _stored(nl.load(x[i_p * 64 + i_f, :]))  # <- combined


@nki.jit
def activation_max_reduce(x):
  tile = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
  nisa.dma_copy(dst=tile, src=x[0:128, :])
  total = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
  nisa.activation(dst=tile, op=nl.exp, data=tile, reduce_op=nl.max, reduce_res=total)  # <- max
  return _stored(total)


@nki.jit
def activation_scale_of_wrong_partitions(x):
  tile = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
  nisa.dma_copy(dst=tile, src=x[0:128, :])
  scale = nl.ndarray((64, 1), dtype=nl.float32, buffer=nl.sbuf)
  nisa.dma_copy(dst=scale, src=x[0:64, 0:1])
  nisa.activation(dst=tile, op=nl.exp, data=tile, scale=scale)  # <- scale
  return _stored(tile)


@pytest.mark.parametrize("kernel,marker,message", [
    (activation_max_reduce, "max", "activation reduce_op must be nl.add"),
    (activation_scale_of_wrong_partitions, "scale",
     "activation scale sbuf (64, 1) float32 must be [128, 1]"),
    (transposing_index, "transposing", "the index order must follow the grid's axes"),
    (combined_index_vectors, "combined", "combined (+ of two nl.arange vectors) are not slices"),
    (partition_dim_too_large, "partitions", "partition dim 256"),
    (misaligned_partition_start, "alignment", "starts at partition 16"),
    (stationary_too_wide, "stationary", "stationary free size 256 exceeds 128"),
    (moving_too_wide, "moving", "moving free size 1024 exceeds 512"),
    (matmul_across_banks, "bank", "crosses a PSUM bank boundary"),
    (integer_matmul, "dtype", "TensorE multiplies"),
    (psum_tensor_too_large, "psum size", "PSUM holds 16384"),
    (too_many_psum_banks, "psum banks", "PSUM (8 banks of 2048 bytes) is full"),
    (sbuf_overflow, "sbuf", "SBUF is full"),
    (dma_from_psum, "psum dma", "PSUM is not a DMA endpoint"),
    (both_inputs_in_psum, "two psum", "at most one input may be in PSUM"),
    (mismatched_shapes, "shapes", "shapes (128, 64) and (128, 32) differ"),
    (slices_out_of_bounds, "bounds", "slice 200:328 is out of bounds for dim 0 of size 256"),
    (writes_its_input, "input", "writes its input 'x'"),
    (reads_uninitialised_memory, "uninitialised",
     "tensor_copy reads uninitialised memory: element (0, 32) of sbuf (128, 64) float32"),
    (partition_marker_not_first, "par_dim", "nl.par_dim in dim 1"),
    (prints_with_a_mask, "refused", "device_print(mask=...) is not supported"),
    (uses_a_refused_instruction, "refused isa", "max8 is not supported"),
], ids=lambda v: v.__name__ if callable(v) and hasattr(v, "__name__") else None)
def test_rule_error_names_the_kernel_line(kernel, marker, message):
  _fails(kernel, (X,), marker, message)


def test_a_call_outside_a_kernel_is_refused():
  with pytest.raises(nki.KernelError, match="only inside a kernel"):
    nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf)


def test_a_kernel_that_returns_nothing_is_refused():
  @nki.jit
  def returns_nothing(x):
    nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf)

  with pytest.raises(nki.KernelError, match="returns nothing"):
    returns_nothing.trace(X)
