"""Iota-derived values and masks are computed on chip from each tile's coordinates (GpSimd `iota`
and `affine_select`, lowering/affine_index.py; passes/expand_index_broadcasts.py), never read
from HBM, and match the JAX CPU backend bit for bit."""

import math

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

import compiler_harness as harness
from hlo_lowering.program import DType, read_program


def _data(shape, dtype, seed):
  return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _opcodes(program: bytes) -> list[str]:
  return [inst.opcode.name for block in read_program(program).blocks
          for inst in block.instructions]


def _causal(scores):
  t = scores.shape[-1]
  return jnp.where(jnp.tril(jnp.ones((t, t), bool)), scores, jnp.asarray(-1e9, scores.dtype))


def test_a_causal_mask_is_one_affine_select_per_tile_and_never_crosses_hbm():
  scores = _data((1, 4, 256, 256), ml_dtypes.bfloat16, 1)
  harness.check(_causal, scores)
  program = harness.compile_fn(_causal, scores)
  opcodes = _opcodes(program)
  assert "AFFINE_SELECT" in opcodes and "GP_IOTA" not in opcodes
  assert not any(op.startswith("TENSOR_") for op in opcodes)  # no VectorE work at all
  # The only HBM tensors: the scores, the result and one-element constants; no mask.
  tensors = read_program(program).tensors
  assert not any(t.dtype == DType.PRED and math.prod(t.shape) > 1 for t in tensors)
  assert sum(t.shape == scores.shape for t in tensors) == 2


def test_a_mask_with_an_offset_and_the_fill_on_the_true_side():
  scores = _data((2, 130, 300), np.float32, 2)
  f = lambda s: jnp.where(jnp.triu(jnp.ones((130, 300), bool), k=3), -jnp.inf, s)
  harness.check(f, scores)
  assert "AFFINE_SELECT" in _opcodes(harness.compile_fn(f, scores))


def test_an_iota_derived_value_stored_is_one_iota_instruction():
  x = np.arange(3 * 1000, dtype=np.int32).reshape(3, 1000)
  f = lambda x: x + (jnp.arange(1000, dtype=jnp.int32) * 3 - 7)
  harness.check(f, x)
  opcodes = _opcodes(harness.compile_fn(f, x))
  assert "IOTA" in opcodes and "GP_IOTA" not in opcodes


def test_a_band_mask_materialises_its_two_predicates_on_chip():
  x = _data((200, 200), np.float32, 3)

  def band(x):
    i = jax.lax.broadcasted_iota(jnp.int32, x.shape, 0)
    j = jax.lax.broadcasted_iota(jnp.int32, x.shape, 1)
    return jnp.where((i - j >= 0) & (i - j < 5), x, 0.0)
  harness.check(band, x)
  opcodes = _opcodes(harness.compile_fn(band, x))
  assert "GP_IOTA" not in opcodes and "IOTA" in opcodes


def test_an_iota_compared_with_data_reads_the_iota_from_a_tile():
  x = np.random.default_rng(4).integers(0, 300, (5, 300)).astype(np.int32)
  f = lambda x: jnp.where(x > jnp.arange(300, dtype=jnp.int32), x, -x)
  harness.check(f, x)


def test_predicates_stored_or_near_the_dtype_limits_stay_exact():
  x = _data((4, 300), np.float32, 5)

  def f(x):
    i = jax.lax.broadcasted_iota(jnp.int32, x.shape, 1)
    near_limit = i > jnp.int32(-2**31 + 100)  # i - c would wrap in int32
    stored = (i - 7 < 2 * i) & (i != 150)
    return jnp.where(near_limit, x, 0.0), stored, jnp.logical_not(i >= 20)
  harness.check(f, x)


def test_a_mask_read_by_two_clusters_is_computed_in_each():
  x = _data((3, 256, 256), np.float32, 6)

  def f(x):
    mask = jnp.tril(jnp.ones((256, 256), bool))
    return jnp.where(mask, x, -1e9), jnp.where(mask, jnp.exp(x), 0.0)
  harness.check(f, x)
  tensors = read_program(harness.compile_fn(f, x)).tensors
  assert not any(t.dtype == DType.PRED and math.prod(t.shape) > 1 for t in tensors)


def test_an_index_expression_over_broadcast_index_expressions():
  x = _data((2, 3, 3), np.float32, 7)

  def f(x):  # the shape of jnp.linalg's pivoting masks
    i = jax.lax.broadcasted_iota(jnp.int32, (3, 1), 0)
    j = jax.lax.broadcasted_iota(jnp.int32, (3, 3), 1)
    upper = jnp.broadcast_to(i, (3, 3)) < j
    return jnp.where(jnp.broadcast_to(upper, x.shape), x, 0.0), upper
  harness.check(f, x)
