"""Generated score chains between q·kᵀ and the softmax: each matches the CPU backend, and each
fused program (fuse-attention and fuse-rows) has the bits of the program compiled without them,
at LNC 1 and 2.

The chains vary what lies between the matmul and the softmax (a bias through ScalarE functions,
a causal mask computed on GpSimd, a row product), the dtype and the row length (one PSUM bank a
block up to four), so the row fusion's pipeline places the scores' readers at varying stages
after q·kᵀ. Seeds 12 and 24 failed before the row fusion kept the scores' last read ahead of
the next matmul into their PSUM banks (row_fusion.py `_pipeline_stages`)."""

import random

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import compiler_harness as harness
from test_attention_fusion import _bits

_FUNCTIONS = [jnp.tanh, jnp.exp, lambda x: x * 2.0, jnp.abs, jax.nn.sigmoid, jnp.negative,
              jnp.sin]
_FORMS = ("bias_after", "bias_before", "mask", "mul_row")


def _chain(rng: random.Random):
  """A plain-JAX attention whose scores meet a bias made by up to three functions."""
  functions = [rng.choice(_FUNCTIONS) for _ in range(rng.randint(0, 3))]
  form = rng.choice(_FORMS)

  def f(q, k, v, bias):
    s = (q @ jnp.swapaxes(k, -1, -2)) / np.asarray(8, q.dtype)
    for g in functions:
      bias = g(bias)
    if form == "mask":
      i = jax.lax.broadcasted_iota(jnp.int32, s.shape, s.ndim - 2)
      j = jax.lax.broadcasted_iota(jnp.int32, s.shape, s.ndim - 1)
      x = jnp.where(i >= j, s + bias, -jnp.inf)
    elif form == "mul_row":
      x = s * bias + s
    elif form == "bias_before":
      x = bias + s
    else:
      x = s + bias
    return jax.nn.softmax(x.astype(jnp.float32), axis=-1).astype(q.dtype) @ v
  return f


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 5, 12, 24])
def test_score_chains_keep_the_unfused_bits(seed):
  rng = random.Random(seed)
  f = _chain(rng)
  dtype = rng.choice([np.float32, ml_dtypes.bfloat16])
  seq, heads = rng.choice([256, 384, 512, 2048]), rng.choice([1, 2])
  data = np.random.default_rng(seed)
  args = ([data.standard_normal((heads, seq, 64)).astype(dtype) for _ in range(3)]
          + [data.standard_normal((heads, seq, seq)).astype(dtype)])
  harness.check(f, *args, scale=8)
  for lnc in (1, 2):
    fused, unfused = (harness.native().run_program(harness.compile_without(f, args, skip,
                                                                           lnc=lnc), args)[0]
                      for skip in ((), ("fuse-attention", "fuse-rows")))
    assert _bits(fused[0]) == _bits(unfused[0]), (seed, lnc)
