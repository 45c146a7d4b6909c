"""gather, scatter, dynamic_slice and dynamic_update_slice (gp_gather / gp_scatter) against the
JAX CPU backend, including out-of-range indices (clamped or dropped as XLA does)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import compiler_harness as harness
from jax_trn import compilation


def _data(shape, dtype=np.float32, seed=0):
  rng = np.random.default_rng(seed)
  if np.dtype(dtype).kind in "iu":
    return rng.integers(0, 100, shape).astype(dtype)
  return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("i", [0, 3, -2, 11])
def test_index_with_traced_scalar(i):
  harness.check(lambda x, i: x[i], _data((6, 130)), np.int32(i))
  assert compilation.last_report().summary()["stablehlo.dynamic_slice"] == {"gpsimd": 1}


def test_index_with_array():
  x = _data((7, 5, 3))
  idx = np.array([[0, 6], [-1, 3], [2, 2]], np.int32)
  harness.check(lambda x, i: x[i], x, idx)
  harness.check(lambda x, i: x[:, i[0]], x, np.array([[4, 0, 1]], np.int32))
  harness.check(lambda x, i, j: x[i, :, j], x, np.array([1, 5], np.int32),
                np.array([2, 0], np.int32))
  assert "stablehlo.gather" in compilation.last_report().summary()


def test_take_along_axis():
  x = _data((9, 140))
  labels = np.random.default_rng(1).integers(0, 140, (9, 1)).astype(np.int32)
  harness.check(lambda x, l: jnp.take_along_axis(x, l, axis=1), x, labels)
  rows = np.random.default_rng(2).integers(0, 9, (3, 140)).astype(np.int32)
  harness.check(lambda x, l: jnp.take_along_axis(x, l, axis=0), x, rows)


@pytest.mark.parametrize("mode", ["clip", "fill"])
def test_take_modes(mode):
  idx = np.array([0, 4, -1, 9, -20, 3], np.int32)
  harness.check(lambda x, i: jnp.take(x, i, axis=1, mode=mode), _data((3, 5)), idx)
  harness.check(lambda x, i: jnp.take(x, i, mode=mode), _data((5,), np.int32), idx)


def test_embedding_lookup_bf16():
  table = _data((50, 16)).astype(jnp.bfloat16)
  tokens = np.array([[1, 49, 0], [7, 7, 3]], np.int32)
  harness.check(lambda t, i: t[i], table, tokens)


@pytest.mark.parametrize("update", ["set", "add", "max", "min", "multiply"])
def test_scatter_with_duplicates_and_out_of_range(update):
  x = _data((6, 4))
  idx = np.array([1, 3, 1, 8, -1, 1], np.int32)  # duplicates; 8 is dropped, -1 wraps to 5
  values = _data((6, 4), seed=2)
  harness.check(lambda x, i, v: getattr(x.at[i], update)(v), x, idx, values)
  assert compilation.last_report().summary()["stablehlo.scatter"] == {"gpsimd": 1}


@pytest.mark.parametrize("update", ["set", "add", "max", "multiply"])
def test_scatter_into_a_scalar_is_its_update_computation(update):
  # x.at[...] on a rank-0 array (Flax's Variable[...] = v): no index, one update.
  harness.check(lambda x, v: getattr(x.at[...], update)(v), np.float32(1.5), np.float32(-2.25))
  harness.check(lambda x, v: getattr(x.at[...], update)(v), np.int32(7), np.int32(-3))
  assert "stablehlo.scatter" not in compilation.last_report().summary()


def test_scatter_drop_mode_and_int():
  x = _data((10,), np.int32)
  idx = np.array([[2], [11], [2], [-3]], np.int32)
  harness.check(lambda x, i: x.at[i[:, 0]].add(5, mode="drop"), x, idx)
  harness.check(lambda x, i: x.at[i[:, 0], None].set(-1, mode="drop"), x[:, None] * 1, idx)


def test_scatter_2d_windows():
  x = _data((5, 6, 3))
  harness.check(lambda x, i, v: x.at[:, i].add(v), x, np.array([0, 5, 0], np.int32),
                _data((5, 3, 3), seed=3))


@pytest.mark.parametrize("start", [(0, 0), (2, 3), (5, -4), (-9, 100)])
def test_dynamic_slice_clamps(start):
  harness.check(lambda x, i, j: jax.lax.dynamic_slice(x, (i, j), (3, 4)), _data((6, 130)),
                np.int32(start[0]), np.int32(start[1]))


@pytest.mark.parametrize("start", [(0, 0), (4, 1), (-3, 200)])
def test_dynamic_update_slice_clamps(start):
  harness.check(lambda x, u, i, j: jax.lax.dynamic_update_slice(x, u, (i, j)), _data((6, 130)),
                _data((3, 4), seed=5), np.int32(start[0]), np.int32(start[1]))
  assert compilation.last_report().summary()["stablehlo.dynamic_update_slice"] == {"gpsimd": 1}


def test_fori_style_update_with_unsigned_index():
  harness.check(lambda x, i: jax.lax.dynamic_update_index_in_dim(x, x[0] * 2, i, 0),
                _data((4, 3)), np.uint32(7))


def test_cross_entropy_with_integer_labels_and_gradient():
  def loss(logits, labels):
    log_probs = jax.nn.log_softmax(logits)
    return -jnp.take_along_axis(log_probs, labels[:, None], axis=-1)[:, 0].mean()

  logits = _data((8, 10))
  labels = np.array([0, 9, 3, 3, 5, 1, 2, 7], np.int32)
  harness.check(loss, logits, labels, scale=10)
  harness.check(jax.grad(loss), logits, labels, scale=10)


def test_gather_report_lists_gpsimd_fallback():
  harness.compile_fn(lambda x, i: x[i], _data((4, 3)), np.array([1, 2], np.int32))
  report = compilation.last_report()
  assert any(op.op == "stablehlo.gather" for op in report.gpsimd_ops())
