"""Each nki.isa instruction (and the decompositions docs/kernels.md lists) computes what NKI
documents, checked against NumPy on the simulator over odd tile shapes: one small kernel per
instruction form, run on NumPy arrays."""

import ml_dtypes
import numpy as np
import pytest

from jax_trn import nki
import jax_trn.nki.isa as nisa
import jax_trn.nki.language as nl

pytest.importorskip("jax_trn._native", reason="jax_trn._native is not built", exc_type=ImportError)

rng = np.random.default_rng(3)
X = rng.standard_normal((97, 37)).astype(np.float32)
COLUMN = rng.standard_normal((97, 1)).astype(np.float32)
Y = rng.standard_normal((97, 37)).astype(np.float32)


def _sbuf(src):
  tile = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.sbuf)
  nisa.dma_copy(dst=tile, src=src)
  return tile


def _out(tile):
  out = nl.ndarray(tile.shape, dtype=tile.dtype, buffer=nl.shared_hbm)
  nisa.dma_copy(dst=out, src=tile)
  return out


def _new(shape, dtype=nl.float32):
  return nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf)


@nki.jit
def two_operator_tensor_scalar(x, column):
  dst = _new(x.shape)
  nisa.tensor_scalar(dst=dst, data=_sbuf(x), op0=nl.subtract, operand0=_sbuf(column),
                     reverse0=True, op1=nl.multiply, operand1=3.0)
  return _out(dst)


@nki.jit
def scalar_tensor_tensor(x, column, y):
  dst = _new(x.shape)
  nisa.scalar_tensor_tensor(dst=dst, data=_sbuf(x), op0=nl.multiply, operand0=_sbuf(column),
                            op1=nl.add, operand1=_sbuf(y))
  return _out(dst)


@nki.jit
def scalar_tensor_tensor_reversed(x, column, y):
  dst = _new(x.shape, x.dtype)
  nisa.scalar_tensor_tensor(dst=dst, data=_sbuf(x), op0=nl.subtract, operand0=_sbuf(column),
                            reverse0=True, op1=nl.subtract, operand1=_sbuf(y), reverse1=True)
  return _out(dst)


@nki.jit
def tensor_scalar_reduce(x):
  dst, total = _new(x.shape), _new((x.shape[0], 1))
  nisa.tensor_scalar_reduce(dst=dst, data=_sbuf(x), op0=nl.add, operand0=1.5,
                            reduce_op=nl.max, reduce_res=total)
  return _out(dst), _out(total)


@nki.jit
def reduce_last_axis_of_3d(x):
  tile = _sbuf(x)
  dst = _new((x.shape[0], x.shape[1]))
  nisa.tensor_reduce(dst=dst, op=nl.add, data=tile, axis=2, negate=True)
  return _out(dst)


@nki.jit
def activations(x, column):
  tile, results = _sbuf(x), []
  for op, scale, bias in ((nl.exp, 0.5, None), (nl.square, 2.0, 1.0), (nl.relu, 1.0, None),
                          (nl.silu, _sbuf(column), 0.25), (nl.tanh, 1.0, _sbuf(column))):
    dst = _new(x.shape)
    nisa.activation(dst=dst, op=op, data=tile, scale=scale, bias=bias)
    results.append(_out(dst))
  return tuple(results)


def _scaled_square_with_row_sum(x, column, dtype):
  dst, total = _new(x.shape, dtype), _new((x.shape[0], 1))
  nisa.activation_reduce(dst=dst, op=nl.square, data=_sbuf(x), scale=_sbuf(column), bias=0.5,
                         reduce_op=nl.add, reduce_res=total)
  return _out(dst), _out(total)


@nki.jit
def scaled_activation_with_row_sums(x, column):
  """A tile scale and the row sum in one ScalarE instruction."""
  return _scaled_square_with_row_sum(x, column, nl.float32)


@nki.jit
def scaled_activation_into_bf16(x, column):
  return _scaled_square_with_row_sum(x, column, nl.bfloat16)


@nki.jit
def transpose_through_psum(x):
  flipped = nl.ndarray((x.shape[1], x.shape[0]), dtype=nl.float32, buffer=nl.psum)
  nisa.nc_transpose(dst=flipped, data=_sbuf(x))
  dst = _new(flipped.shape)
  nisa.tensor_copy(dst=dst, src=flipped, engine=nisa.engine.scalar)
  return _out(dst)


@nki.jit
def iota_and_causal_select(x):
  positions = _new(x.shape, nl.int32)
  nisa.iota(dst=positions, pattern=[[1, x.shape[1]]], offset=5, channel_multiplier=100)
  masked = _new(x.shape)
  nisa.affine_select(dst=masked, pattern=[[-1, x.shape[1]]], offset=0, channel_multiplier=1,
                     on_true_tile=_sbuf(x), on_false_value=-9.0, cmp_op=nl.greater_equal)
  return _out(positions), _out(masked)


@nki.jit
def memset_psum_then_accumulate(x):
  """A PSUM tile memset, then two matmuls accumulated into another one (start/stop flags)."""
  filled = nl.ndarray((x.shape[0], 8), dtype=nl.float32, buffer=nl.psum)
  nisa.memset(dst=filled, value=2.5)
  ones = _new((x.shape[0], 8))
  nisa.tensor_copy(dst=ones, src=filled)
  acc = nl.ndarray((x.shape[1], 8), dtype=nl.float32, buffer=nl.psum)
  tile = _sbuf(x)
  nisa.nc_matmul(dst=acc, stationary=tile, moving=ones)
  nisa.nc_matmul(dst=acc, stationary=tile, moving=ones)
  dst = _new(acc.shape)
  nisa.tensor_copy(dst=dst, src=acc)
  return _out(dst)


@nki.jit
def interleaved_accumulation_groups(a_t, b):
  """k outer, n inner: two accumulation groups open side by side in one PSUM tile."""
  acc = nl.ndarray((a_t.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.psum)
  half = b.shape[1] // 2
  for k0 in range(0, a_t.shape[0], 64):
    stationary = _sbuf(a_t[k0:k0 + 64, :])
    for n0 in (0, half):
      nisa.nc_matmul(dst=acc[:, n0:n0 + half], stationary=stationary,
                     moving=_sbuf(b[k0:k0 + 64, n0:n0 + half]))
  dst = _new(acc.shape)
  nisa.tensor_copy(dst=dst, src=acc)
  return _out(dst)


A_T = rng.standard_normal((192, 40)).astype(np.float32)
B = rng.standard_normal((192, 512)).astype(np.float32)


def _silu(v):
  return v / (1 + np.exp(-v))


CASES = {
    "two_operator_tensor_scalar": (two_operator_tensor_scalar, (X, COLUMN),
                                   lambda x, c: [(c - x) * 3.0]),
    "scalar_tensor_tensor": (scalar_tensor_tensor, (X, COLUMN, Y), lambda x, c, y: [x * c + y]),
    "tensor_scalar_reduce": (tensor_scalar_reduce, (X,),
                             lambda x: [x + 1.5, (x + 1.5).max(1, keepdims=True)]),
    "reduce_last_axis_of_3d": (reduce_last_axis_of_3d, (X.reshape(97, 37, 1)[:, :36].reshape(
        97, 4, 9).copy(),), lambda x: [-x.sum(2)]),
    "activations": (activations, (X, COLUMN), lambda x, c: [
        np.exp(0.5 * x), (2 * x + 1) ** 2, np.maximum(x, 0), _silu(x * c + 0.25),
        np.tanh(x + c)]),
    "scaled_activation_with_row_sums": (scaled_activation_with_row_sums, (X, COLUMN),
                                        lambda x, c: [(x * c + 0.5) ** 2,
                                                      ((x * c + 0.5) ** 2).sum(1, keepdims=True)]),
    "transpose_through_psum": (transpose_through_psum, (X,), lambda x: [x.T]),
    "iota_and_causal_select": (iota_and_causal_select, (X,), lambda x: [
        5 + 100 * np.arange(97)[:, None] + np.arange(37)[None, :],
        np.where(np.arange(97)[:, None] >= np.arange(37)[None, :], x, -9.0)]),
    "interleaved_accumulation_groups": (interleaved_accumulation_groups, (A_T, B),
                                        lambda a_t, b: [a_t.T @ b]),
    "memset_psum_then_accumulate": (memset_psum_then_accumulate, (X,),
                                    lambda x: [2 * x.T.astype(np.float64) @ np.full((97, 8), 2.5)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_instruction_matches_numpy(name):
  kernel, args, expected = CASES[name]
  actual = kernel(*args)
  actual = actual if isinstance(actual, tuple) else (actual,)
  for a, e in zip(actual, expected(*[a.astype(np.float64) for a in args]), strict=True):
    if a.dtype.kind == "i":
      np.testing.assert_array_equal(a, e)
    else:
      np.testing.assert_allclose(a, e, rtol=2e-5, atol=5e-5)


def test_a_scaled_and_summed_activation_is_one_scalar_engine_instruction():
  def methods(kernel):
    program = kernel.trace(X, COLUMN)
    return [inst.method for inst in program.instructions if inst.method != "dma_copy"]
  assert methods(scaled_activation_with_row_sums) == ["activation_reduce"]
  # A bf16 dst too: the sum is of the fp32 values before their rounding, in the same instruction.
  assert methods(scaled_activation_into_bf16) == ["activation_reduce"]


def test_a_summed_activation_into_bf16_sums_the_values_before_their_rounding():
  # ScalarE's 32-bit reduce registers take the fp32 activated values; only dst is rounded.
  wide, wide_total = scaled_activation_with_row_sums(X, COLUMN)
  narrow, narrow_total = scaled_activation_into_bf16(X, COLUMN)
  np.testing.assert_array_equal(narrow_total, wide_total)
  np.testing.assert_array_equal(narrow, wide.astype(ml_dtypes.bfloat16))


def test_scalar_tensor_tensor_is_one_vector_engine_instruction_on_floats():
  program = scalar_tensor_tensor.trace(X, COLUMN, Y)
  assert [inst.method for inst in program.instructions
          if inst.method != "dma_copy"] == ["scalar_tensor_tensor"]
  ints = [a.astype(np.int32) for a in (X * 10, COLUMN * 10, Y * 10)]
  program = scalar_tensor_tensor.trace(*ints)
  assert [inst.method for inst in program.instructions
          if inst.method != "dma_copy"] == ["tensor_scalar", "tensor_tensor"]


@pytest.mark.parametrize("dtype", [np.float32, "bfloat16", np.int32])
def test_scalar_tensor_tensor_keeps_its_intermediate_in_fp32(dtype):
  import ml_dtypes
  dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype
  scale = 1 if np.dtype(dtype).kind == "f" else 100
  x, column, y = ((a * scale).astype(dtype) for a in (X, COLUMN, Y))
  actual = scalar_tensor_tensor_reversed(x, column, y)
  if np.dtype(dtype).kind == "i":
    np.testing.assert_array_equal(actual, y - (column - x))
    return
  # y - (column - x): the inner difference rounded to fp32 (not to bf16), the result to the
  # dtype once.
  inner = column.astype(np.float32) - x.astype(np.float32)
  expected = (y.astype(np.float32) - inner).astype(dtype)
  np.testing.assert_array_equal(actual.view(np.uint16 if dtype != np.float32 else np.uint32),
                                expected.view(np.uint16 if dtype != np.float32 else np.uint32))


@nki.jit
def bf16_tensor_tensor(x, column, y):
  dst = _new(x.shape, x.dtype)
  nisa.tensor_tensor(dst=dst, data1=_sbuf(x), data2=_sbuf(y), op=nl.multiply)
  return _out(dst)


def test_scalar_tensor_tensor_takes_a_tensor_tensor_time_in_bf16_too(trn):
  """NKI: "approximately the same latency as a regular tensor_tensor", so on trn2 bf16 operands
  run at VectorE's 2x two-byte rate for both; and both are kernel instructions inside jit."""
  import jax
  import ml_dtypes
  x, column, y = (a.astype(ml_dtypes.bfloat16) for a in (X, COLUMN, Y))
  busy = {}
  for kernel in (bf16_tensor_tensor, scalar_tensor_tensor_reversed):
    kernel(x, column, y)
    busy[kernel] = kernel.last_simulation.profile.engine_busy_ns("DVE")
  assert busy[scalar_tensor_tensor_reversed] == pytest.approx(busy[bf16_tensor_tensor])
  placed = [jax.device_put(a, trn) for a in (x, column, y)]
  inside_jit = jax.jit(scalar_tensor_tensor_reversed)(*placed)
  np.testing.assert_array_equal(np.asarray(inside_jit).view(np.uint16),
                                scalar_tensor_tensor_reversed(x, column, y).view(np.uint16))
