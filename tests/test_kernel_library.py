"""jax_trn.kernels: every library kernel gives its plain-JAX reference's result (run on the JAX
CPU backend) over odd shapes and both float dtypes, on NumPy arrays and inside jax.jit."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from cpu_reference import assert_close
from jax_trn import kernels
from jax_trn.kernels import attention_backward, softmax_backward

pytest.importorskip("jax_trn._native", reason="jax_trn._native is not built", exc_type=ImportError)

rng = np.random.default_rng(2)
BF16 = ml_dtypes.bfloat16


def _normal(shape, dtype):
  return rng.standard_normal(shape).astype(dtype)


def _args(name, dtype):
  """Odd shapes: partial row tiles, a 3-d input, features not a multiple of 128."""
  if name == "rmsnorm":
    return (_normal((3, 67, 1100), dtype), _normal((1100,), dtype)), {}  # two PSUM tiles
  if name == "layernorm":
    return (_normal((131, 96), dtype), _normal((96,), dtype), _normal((96,), dtype)), {}
  if name == "softmax":
    return (_normal((2, 129, 301), dtype),), {}
  if name == "softmax_backward":  # a softmax output and its cotangent
    y = np.asarray(jax.nn.softmax(_normal((2, 129, 301), np.float32), axis=-1))
    return (y.astype(dtype), _normal((2, 129, 301), dtype)), {}
  if name == "rotary":
    # 20 heads at d 64: a group of 16 heads (a PSUM bank of fp32), then one of 4.
    return (_normal((20, 130, 64), dtype), _normal((130, 32), dtype), _normal((130, 32), dtype)), {}
  if name == "flash_attention":  # 4 query heads over 2 kv heads (GQA), 600 keys, causal
    return (_normal((4, 600, 64), dtype), _normal((2, 600, 64), dtype),
            _normal((2, 600, 64), dtype)), {"causal": True}
  return ((_normal((600, 200), dtype), _normal((200, 136), dtype), _normal((136,), dtype)),
          {"act": "silu"})


def _expected(name, args, kwargs):
  cpu = jax.devices("cpu")[0]
  reference = kernels.KERNELS[name][1]
  return np.asarray(jax.jit(lambda *a: reference(*a, **kwargs))(
      *[jax.device_put(a, cpu) for a in args]))


# bf16 outputs round once more than the fp32 reference path would be compared at fp32 scale.
SCALE = {"matmul_bias_act": 16.0, "flash_attention": 8.0}


@pytest.mark.parametrize("dtype", [np.float32, BF16], ids=["f32", "bf16"])
@pytest.mark.parametrize("name", sorted(kernels.KERNELS))
def test_library_kernel_on_numpy_matches_its_reference(name, dtype):
  args, kwargs = _args(name, dtype)
  kernel = kernels.KERNELS[name][0]
  assert_close([kernel(*args, **kwargs)], [_expected(name, args, kwargs)],
               scale=SCALE.get(name, 2.0))


@pytest.mark.parametrize("name", sorted(kernels.KERNELS))
def test_library_kernel_inside_jit_matches_its_reference(name, trn):
  args, kwargs = _args(name, np.float32)
  kernel = kernels.KERNELS[name][0]
  actual = jax.jit(lambda *a: kernel(*a, **kwargs))(*[jax.device_put(a, trn) for a in args])
  assert_close([np.asarray(actual)], [_expected(name, args, kwargs)], scale=SCALE.get(name, 2.0))


@pytest.mark.parametrize("act", sorted(kernels.matmul_bias_act.ACTIVATIONS))
def test_matmul_bias_act_applies_each_activation(act):
  x, w, b = _normal((70, 130), np.float32), _normal((130, 40), np.float32), _normal((40,), np.float32)
  kernel = kernels.KERNELS["matmul_bias_act"][0]
  assert_close([kernel(x, w, b, act=act)], [_expected("matmul_bias_act", (x, w, b), {"act": act})],
               scale=16.0)


def test_flash_attention_without_mask_matches_its_reference():
  q, k, v = (_normal((2, 300, 128), np.float32) for _ in range(3))
  kernel, reference = kernels.KERNELS["flash_attention"]
  assert_close([kernel(q, k, v)], [_expected("flash_attention", (q, k, v), {})], scale=8.0)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_flash_attention_logsumexp_uses_the_shift_its_exponentials_used(causal):
  """Large bf16 scores (scale * s up to ~30), where the row max rounded to bf16 (the shift
  pass 2 subtracts by a rank-1 matmul) is off the exact max by up to ~0.1: the output and the
  logsumexp still match the reference's, so both used the same shift."""
  q, k, v = (_normal((2, 384, 128), BF16) * 3 for _ in range(3))
  out, lse = kernels.attention.flash_attention_kernel(q, k, v, causal=causal, with_lse=True)
  scores = np.einsum("hqd,hkd->hqk", q.astype(np.float64), k.astype(np.float64)) / np.sqrt(128)
  if causal:
    scores = np.where(np.tril(np.ones((384, 384), bool)), scores, -np.inf)
  peak = scores.max(axis=-1, keepdims=True)
  expected = peak[..., 0] + np.log(np.exp(scores - peak).sum(axis=-1))
  np.testing.assert_allclose(lse, expected, rtol=0, atol=0.05)
  assert_close([out], [_expected("flash_attention", (q, k, v), {"causal": causal})], scale=8.0)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_flash_attention_gradients_match_the_reference(causal, trn, cpu):
  """jax.grad through the custom_vjp pair (forward kernel saving logsumexp, backward kernel)
  against jax.grad of the plain-JAX reference: GQA (4 query heads over 2 kv heads), 300 keys."""
  q = _normal((4, 300, 64), np.float32)
  k, v = _normal((2, 300, 64), np.float32), _normal((2, 300, 64), np.float32)
  weights = _normal((4, 300, 64), np.float32)

  def grads(attention, device):
    loss = lambda q, k, v: jnp.sum(attention(q, k, v) * weights)  # noqa: E731
    return jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(*[jax.device_put(a, device)
                                                         for a in (q, k, v)])

  actual = grads(lambda q, k, v: attention_backward.flash_attention(q, k, v, causal), trn)
  expected = grads(lambda q, k, v: attention_backward.reference(q, k, v, causal=causal), cpu)
  assert_close([np.asarray(a) for a in actual], [np.asarray(e) for e in expected], scale=8.0)


@pytest.mark.parametrize("dtype", [np.float32, BF16], ids=["f32", "bf16"])
def test_softmax_gradient_matches_the_reference(dtype, trn, cpu):
  """jax.grad through the custom_vjp pair (forward kernel, backward kernel reading its output)
  against jax.grad of the plain-JAX softmax, over partial row tiles."""
  x, weights = _normal((3, 130, 200), dtype), _normal((3, 130, 200), np.float32)

  def grad(softmax, device):
    loss = lambda x: jnp.sum(softmax(x).astype(jnp.float32) * weights)  # noqa: E731
    return np.asarray(jax.jit(jax.grad(loss))(jax.device_put(x, device)))

  expected = grad(kernels.softmax.reference, cpu)
  assert_close([grad(softmax_backward.softmax, trn)], [expected], scale=2.0)


def test_rotary_of_heads_wider_than_a_psum_bank_matches_its_reference():
  """d / 2 = 550: one head's fp32 products in PSUM span more than one bank."""
  x, cos, sin = _normal((2, 130, 1100), np.float32), _normal((130, 550), np.float32), _normal(
      (130, 550), np.float32)
  kernel = kernels.KERNELS["rotary"][0]
  assert_close([kernel(x, cos, sin)], [_expected("rotary", (x, cos, sin), {})], scale=2.0)


def test_layernorm_of_bf16_rows_far_from_zero_matches_its_reference():
  """bf16 rows whose mean is 30 standard deviations from zero, over two PSUM tiles of columns:
  the kernel centres before it rounds to bf16, so nothing cancels."""
  x = (30 + rng.standard_normal((260, 1100))).astype(BF16)
  gamma, beta = _normal((1100,), BF16), _normal((1100,), BF16)
  kernel = kernels.KERNELS["layernorm"][0]
  assert_close([kernel(x, gamma, beta)], [_expected("layernorm", (x, gamma, beta), {})],
               scale=2.0)
