"""A dot_general operand broadcast along an output dim (the summed loss's cotangent in a matmul's
gradient: `ones @ w.T`, `x.T @ ones`) computes each distinct output element once: the rows (or
columns, or batches) along the broadcast dim are equal, so only one is multiplied and the result
is their broadcast, stored dense on chip in long DMA runs when it is a program output
(hlo_lowering/lowering/matmul.py, broadcast_store.py). Results are bit-identical to the same
matmul of a dense operand holding the same values."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

import compiler_harness as harness
from cpu_reference import sum_of_products_bounds
from hlo_lowering.lowering.tiling import MIN_RUN_BYTES
from hlo_lowering.program import read_program

BF16 = ml_dtypes.bfloat16


def _data(shape, dtype, seed):
  return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _run(f, *args):
  """(outputs, profile) of f on the simulator."""
  program = harness.compile_fn(f, *args)
  return harness.native().run_program(program, list(args))


def _output_store_runs(f, *args) -> list[int]:
  """Contiguous bytes per HBM run of every DMA writing a program output."""
  parsed = read_program(harness.compile_fn(f, *args))
  runs = []
  for block in parsed.blocks:
    for inst in block.instructions:
      dst = inst.operands.get("dst") if inst.opcode.name == "DMA_COPY" else None
      if dst is None or not hasattr(dst, "dims"):
        continue
      tensor = parsed.tensors[dst.tensor]
      if tensor.kind.name != "OUTPUT":
        continue
      run = 1
      for stride, count in reversed(dst.dims):
        if stride != run and count > 1:
          break
        run *= count
      runs.append(run * tensor.dtype.itemsize)
  return runs


def test_a_lhs_broadcast_along_rows_multiplies_one_row():
  w = _data((384, 256), BF16, 1)
  f = lambda w: jnp.ones((300, 256), jnp.bfloat16) @ w.T
  harness.check(f, w)
  (out,), profile = _run(f, w)
  assert profile["matmul_flops"] == 2 * 1 * 384 * 256
  (dense,), dense_profile = _run(lambda ones, w: ones @ w.T, np.ones((300, 256), BF16), w)
  assert dense_profile["matmul_flops"] == 2 * 300 * 384 * 256
  np.testing.assert_array_equal(out.view(np.uint16), dense.view(np.uint16))
  assert profile["device_time_ns"] < dense_profile["device_time_ns"]


def test_a_rhs_broadcast_along_columns_is_stored_dense_in_long_runs():
  h = _data((300, 256), BF16, 2)
  f = lambda h: h.T @ jnp.ones((300, 512), jnp.bfloat16)
  harness.check(f, h)
  (out,), profile = _run(f, h)
  assert profile["matmul_flops"] == 2 * 256 * 1 * 300
  (dense,), dense_profile = _run(lambda h, ones: h.T @ ones, h, np.ones((300, 512), BF16))
  np.testing.assert_array_equal(out.view(np.uint16), dense.view(np.uint16))
  # The output's columns come from one column through SBUF, never one element per DMA run.
  runs = _output_store_runs(f, h)
  assert runs and min(runs) >= MIN_RUN_BYTES
  assert profile["device_time_ns"] < dense_profile["device_time_ns"]


def test_a_broadcast_result_read_by_an_elementwise_op_stays_a_view():
  w = _data((256, 640), np.float32, 3)
  f = lambda w: jnp.tanh(jnp.full((200, 256), 0.5, jnp.float32) @ w)
  harness.check(f, w)
  _, profile = _run(f, w)
  assert profile["matmul_flops"] == 2 * 1 * 640 * 256


def test_batches_broadcast_in_both_operands_are_multiplied_once():
  a, b = _data((130, 200), np.float32, 4), _data((200, 129), np.float32, 5)
  f = lambda a, b: jnp.broadcast_to(a, (3, 130, 200)) @ jnp.broadcast_to(b, (3, 200, 129))
  harness.check(f, a, b, bounds=sum_of_products_bounds(f, a, b, terms=200))
  _, profile = _run(f, a, b)
  assert profile["matmul_flops"] == 2 * 130 * 129 * 200


def test_a_rhs_broadcast_along_the_contraction_is_multiplied_as_is():
  """rhs[k, n] = v[n]: no output dim is broadcast, the dense schedule runs (exact products)."""
  x, v = _data((129, 300), np.float32, 6), _data((130,), np.float32, 7)
  f = lambda x, v: x @ jnp.broadcast_to(v, (300, 130))
  harness.check(f, x, v, bounds=sum_of_products_bounds(f, x, v, terms=300))
  _, profile = _run(f, x, v)
  assert profile["matmul_flops"] == 2 * 129 * 130 * 300


def test_weight_gradient_of_a_summed_loss():
  """jax.grad of sum(x @ w): the cotangent is a broadcast 1, so dW = x.T @ ones has equal columns
  and dx = ones @ w.T equal rows; both are program outputs stored in long runs."""
  x, w = _data((256, 384), BF16, 8), _data((384, 512), BF16, 9)
  f = jax.grad(lambda w, x: jnp.sum((x @ w).astype(jnp.float32)), argnums=(0, 1))
  harness.check(f, w, x, scale=4)
  runs = _output_store_runs(f, w, x)
  assert runs and min(runs) >= MIN_RUN_BYTES


def _lnc_run(f, args, lnc):
  program = harness.compile_fn(f, *args, lnc=lnc)
  return harness.native().run_program(program, list(args))


def test_a_transposed_matrix_times_a_vector_streams_the_matrix_with_the_same_bits():
  """`x.T @ v` and a summed loss's `h.T @ ones` (matmul.py `_transposed_vector_product`): x is
  the moving operand in rows of contiguous elements, v the one-column stationary. The bits are
  those of the same product with a row-major matrix (x.T passed dense, multiplied as it is),
  on one core and split over two (the matrix read from HBM is a few MiB, its FLOPs few)."""
  x, v = _data((2048, 1536), BF16, 1), _data((2048, 1), BF16, 2)
  transposed = lambda x, v: x.T @ v
  summed = lambda x: x.T @ jnp.ones((2048, 640), jnp.bfloat16)  # a broadcast of one column
  bounds = sum_of_products_bounds(transposed, x, v, terms=2048)
  harness.check(transposed, x, v, bounds=bounds)
  harness.check(summed, x, bounds=sum_of_products_bounds(summed, x, terms=2048))
  dense_xt = np.ascontiguousarray(x.T)
  (reference,), _ = _lnc_run(lambda xt, v: xt @ v, [dense_xt, v], 1)
  ones = np.ones((2048, 1), BF16)
  for lnc in (1, 2):
    (out,), profile = _lnc_run(transposed, [x, v], lnc)
    np.testing.assert_array_equal(out.view(np.uint16), reference.view(np.uint16))
    (columns,), _ = _lnc_run(summed, [x], lnc)
    (one,), _ = _lnc_run(transposed, [x, ones], lnc)
    assert (columns.view(np.uint16) == one.view(np.uint16)).all()  # every column alike
    second = [s for s, e in profile["streams"].items() if s.endswith("@1") and e["instructions"]]
    assert bool(second) == (lnc == 2)
    # 16 K tiles × 3 blocks of 512 columns (as the lhs: 12 m-tiles × 16 one-column matmuls).
    pe = sum(e["instructions"] for s, e in profile["streams"].items() if s.startswith("PE"))
    assert pe == 16 * 3
