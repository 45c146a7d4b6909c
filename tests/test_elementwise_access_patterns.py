"""Elementwise operands reach SBUF through long DMA runs: a per-row broadcast value is loaded one
element per partition and read as VectorE's per-partition scalar, and a few long rows are split so
the tile fills the partitions (hlo_lowering/lowering/elementwise.py, tiling.py)."""

import math

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

import compiler_harness as harness
from hlo_lowering.lowering.tiling import MIN_RUN_BYTES
from hlo_lowering.program import Memory, read_program


def _data(shape, dtype, seed):
  return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _instructions(program: bytes):
  return [inst for block in read_program(program).blocks for inst in block.instructions]


def _run_bytes(dims, itemsize) -> int:
  """Contiguous bytes per run of ((stride, count), ...) dims: the innermost dims that nest."""
  run = 1
  for stride, count in reversed(dims):
    if stride != run and count > 1:
      break
    run *= count
  return run * itemsize


def _dmas(program: bytes):
  """(HBM tensor, HBM run bytes, SBUF tile) of every DMA between HBM and SBUF."""
  parsed = read_program(program)
  result = []
  for inst in _instructions(program):
    if inst.opcode.name != "DMA_COPY":
      continue
    hbm, tile = ((inst.operands["src"], inst.operands["dst"]) if hasattr(inst.operands["src"], "dims")
                 else (inst.operands["dst"], inst.operands["src"]))
    tensor = parsed.tensors[hbm.tensor]
    result.append((tensor, _run_bytes(hbm.dims, tensor.dtype.itemsize), tile))
  return result


def test_a_per_row_operand_is_loaded_once_per_partition_and_read_as_a_scalar():
  x, row = _data((512, 2048), np.float32, 1), _data((512, 1), np.float32, 2)
  f = lambda x, row: (x - row) / row
  harness.check(f, x, row)
  program = harness.compile_fn(f, x, row)
  row_loads = [tile for tensor, _, tile in _dmas(program) if tensor.shape == (512, 1)]
  assert row_loads and all(t.memory == Memory.SBUF and t.free_shape == (1,) for t in row_loads)
  assert len(row_loads) == 4  # one per tile of 128 rows: both ops read the same load
  scalar_ops = [i for i in _instructions(program) if i.opcode.name == "TENSOR_SCALAR"]
  assert len(scalar_ops) == 2 * len(row_loads)
  assert all(hasattr(i.operands["scalar"], "partition_count") for i in scalar_ops)
  assert not any(i.opcode.name == "TENSOR_TENSOR" for i in _instructions(program))
  # The full-size operand and the result move in runs of whole rows.
  assert all(run >= MIN_RUN_BYTES for tensor, run, _ in _dmas(program) if tensor.shape != (512, 1))


def test_a_per_row_operand_of_select_is_read_with_stride_zero():
  x, row = _data((300, 700), np.float32, 3), _data((300, 1), np.float32, 4)
  harness.check(lambda x, row: jnp.where(x > row, x, row), x, row)


def test_a_per_row_operand_as_first_operand_keeps_operand_order():
  x, row = _data((129, 130), np.float32, 5), _data((129, 1), np.float32, 6)
  harness.check(lambda x, row: (row - x) / (row + 3.0), x, row)


def test_a_scalar_broadcast_over_every_dim_is_loaded_per_partition():
  x, s = _data((1000, 30), ml_dtypes.bfloat16, 7), _data((), ml_dtypes.bfloat16, 8)
  f = lambda x, s: jnp.where(x > 0, x, s)
  harness.check(f, x, s)
  program = harness.compile_fn(f, x, s)
  assert all(tile.free_shape == (1,) for tensor, _, tile in _dmas(program) if tensor.shape == ())


def test_few_long_rows_under_a_broadcast_mask_fill_the_partitions():
  scores = _data((1, 16, 512, 512), ml_dtypes.bfloat16, 9)
  mask = np.tril(np.ones((512, 512), bool))
  f = lambda s, m: jnp.where(m, s, jnp.asarray(-1e9, s.dtype))
  harness.check(f, scores, mask)
  program = harness.compile_fn(f, scores, mask)
  full = [(run, tile) for _, run, tile in _dmas(program) if tile.free_size > 1]
  assert full and all(tile.partition_count == 128 and run >= MIN_RUN_BYTES for run, tile in full)


def test_a_convert_of_a_broadcast_converts_only_its_distinct_elements():
  # A gradient's splat cotangent converted for a matmul: not fused, so convert's own rule.
  s, w = np.float32(0.3), _data((1024, 256), ml_dtypes.bfloat16, 10)
  f = lambda s, w: jnp.broadcast_to(s, (512, 1024)).astype(jnp.bfloat16) @ w
  harness.check(f, s, w)
  program = harness.compile_fn(f, s, w)
  tensors = read_program(program).tensors
  from_s = [i for i in _instructions(program) if i.opcode.name == "DMA_COPY"
            and hasattr(i.operands["src"], "dims") and tensors[i.operands["src"].tensor].shape == ()]
  assert from_s and all(math.prod(c for _, c in i.operands["src"].dims) == 1 for i in from_s)


def test_a_converted_splat_cotangent_is_an_immediate_not_a_stride_zero_load():
  """jax.grad of a summed bf16 residual block converts the f32 cotangent 1.0 to bf16 once for
  its two readers: the converted broadcast is still a known splat (the conversion is exact), so
  the layer norm's row-fused gradient takes it as an immediate instead of loading its one element
  into every tile position (the transformer block's residual gradient: 372 us of DMA)."""
  x, w = _data((512, 1024), ml_dtypes.bfloat16, 9), _data((1024, 1024), ml_dtypes.bfloat16, 10)

  def loss(x, w):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return jnp.sum((x + ((x - mean) * jax.lax.rsqrt(var + 1e-5)) @ w).astype(jnp.float32))

  f = jax.grad(loss)
  harness.check(f, x, w, scale=64)
  program = harness.compile_fn(f, x, w)
  splat_loads = [tile for tensor, _, tile in _dmas(program)
                 if math.prod(tensor.shape) == 1 and hasattr(tile, "free_shape")
                 and math.prod(tile.free_shape) > 1]
  assert not splat_loads
