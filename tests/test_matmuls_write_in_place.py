"""Matmuls that feed a concatenate, or a transpose that would copy, only through views write
their results into the concatenation's slots or in the transposed layout (lowering/in_place.py):
the head transposes and the concatenate move no data. Results match the CPU backend and are
bit-identical to the same program copying (a value read twice is not written in place)."""

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import compiler_harness as harness
from cpu_reference import sum_of_products_bounds
from jax_trn import compilation

_BF16 = jnp.bfloat16
_DIMS = (((2,), (1,)), ((0,), (0,)))


def _heads_merged(y):
  """[heads, t, d] -> [t, heads * d], as attention's backward merges dQ, dK and dV."""
  heads, t, d = y.shape
  return y.transpose(1, 0, 2).reshape(t, heads * d)


def _gradients(p, ds, q, k, do, w, return_dv=False):
  """attention's dQ, dK (one pair: they share dS) and dV merged and concatenated, then the
  weight gradient of `x @ wqkv` reading the concatenation (and the merged dV: read twice, it
  is copied into its slot)."""
  dq = lax.dot_general(ds, k, _DIMS)
  dk = lax.dot_general(jnp.swapaxes(ds, 1, 2), q, _DIMS)
  dv = lax.dot_general(jnp.swapaxes(p, 1, 2), do, _DIMS)
  merged = [_heads_merged(y) for y in (dq, dk, dv)]
  dw = w.T @ jnp.concatenate(merged, axis=-1)
  return (dw, merged[2]) if return_dv else dw


def _inputs(heads, t, d, dtype):
  rng = np.random.default_rng(0)
  square = lambda: rng.standard_normal((heads, t, t)).astype(dtype)
  thin = lambda: rng.standard_normal((heads, t, d)).astype(dtype)
  return [square(), square(), thin(), thin(), thin(), rng.standard_normal((t, 96)).astype(dtype)]


def _instructions(op: str) -> list[int]:
  return [e.instructions for e in compilation.last_report().ops if e.op == op]


def _run(f, args, lnc):
  program = harness.compile_fn(f, *args, lnc=lnc)
  return harness.run_program(program, args)


@pytest.mark.parametrize("heads,t,d,dtype,lnc", [(16, 512, 64, _BF16, 2),
                                                 (3, 384, 32, np.float32, 1),
                                                 (2, 256, 64, _BF16, 2)])
def test_merged_heads_are_written_into_the_concatenation(heads, t, d, dtype, lnc):
  args = _inputs(heads, t, d, dtype)
  harness.check(_gradients, *args, lnc=lnc,
                bounds=sum_of_products_bounds(_gradients, *args, terms=t * t))
  assert _instructions("stablehlo.concatenate") == [0]
  assert set(_instructions("stablehlo.transpose")) == {0}  # the head merges and the views

  (in_place,) = _run(_gradients, args, lnc)
  reference, _ = _run(lambda *a: _gradients(*a, return_dv=True), args, lnc)
  assert _instructions("stablehlo.concatenate")[0] > 0
  assert in_place.tobytes() == reference.tobytes()


def test_a_concatenation_returned_with_a_copied_operand():
  """The concatenation is a program output; one operand (a parameter) is copied, the matmul's
  is written in place."""
  def f(a, b, c):
    return jnp.concatenate([_heads_merged(lax.dot_general(a, b, _DIMS)), c], axis=-1)

  rng = np.random.default_rng(1)
  a = rng.standard_normal((4, 256, 128), np.float32)
  b = rng.standard_normal((4, 128, 64), np.float32)
  c = rng.standard_normal((256, 40), np.float32)
  harness.check(f, a, b, c, bounds=sum_of_products_bounds(f, a, b, c, terms=128))
  assert set(_instructions("stablehlo.transpose")) == {0}
  assert _instructions("stablehlo.concatenate")[0] > 0  # c's copy


@pytest.mark.parametrize("lnc", [1, 2])
def test_merged_attention_heads_are_written_transposed(lnc):
  """`(p @ v)` merged from [heads, t, d] to [t, heads · d] before `@ wo` (a reshape of the
  transposed view has no strided form): the matmul writes the merged layout, the transpose
  moves nothing."""
  def f(p, v, wo, return_heads=False):
    heads = lax.dot_general(p, v, _DIMS)
    merged = heads.transpose(1, 0, 2).reshape(p.shape[1], -1)
    return (merged @ wo, heads) if return_heads else merged @ wo

  rng = np.random.default_rng(2)
  p, v = (rng.standard_normal(s).astype(_BF16) for s in ((8, 512, 512), (8, 512, 64)))
  wo = rng.standard_normal((512, 256)).astype(_BF16)
  args = [p, v, wo]
  harness.check(f, *args, lnc=lnc, bounds=sum_of_products_bounds(f, *args, terms=512 * 512))
  assert _instructions("stablehlo.transpose") == [0]
  (in_place,) = _run(f, args, lnc)
  reference, _ = _run(lambda *a: f(*a, return_heads=True), args, lnc)
  assert _instructions("stablehlo.transpose")[0] > 0
  assert in_place.tobytes() == reference.tobytes()
