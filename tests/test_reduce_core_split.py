"""A reduce on an LNC=2 device splits its kept elements between the two physical cores
(lowering/reduce.py `_core_shares`): results match the CPU backend and are bit-identical to the
same reduce on one core (LNC=1), each element reduced by the same instructions."""

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import compiler_harness as harness
from cpu_reference import sum_of_products_bounds

_BF16 = jnp.bfloat16


def _sum0(x):
  return jnp.sum(x, axis=0)


def _sum_rows(x):
  return jnp.sum(x, axis=-1)


def _max_rows_offset(x):  # an init that is not the identity, combined at the end
  return lax.reduce(x, np.asarray(0.5, x.dtype), lax.max, (1,))


def _min_middle(x):
  return jnp.min(x, axis=1)


def _scale_gradient(g, xhat):  # a layernorm's: the product summed over the rows
  return jnp.sum(g * xhat, axis=0)


# (name, f, shapes, dtype, elements reduced): the columns layout (a kept dim contiguous), the
# rows layout, a kept dim split with the reduced one in the middle, odd sizes.
CASES = [
    ("sum axis 0 (columns)", _sum0, [(2048, 1024)], _BF16, 2048),
    ("sum axis 0 f32, odd columns", _sum0, [(700, 1031)], np.float32, 700),
    ("sum rows (rows)", _sum_rows, [(4096, 300)], np.float32, 300),
    ("max rows, init 0.5", _max_rows_offset, [(1000, 520)], np.float32, 520),
    ("min over the middle dim", _min_middle, [(6, 700, 130)], _BF16, 700),
    ("int32 sum axis 0", _sum0, [(1024, 600)], np.int32, 1024),
    ("layernorm scale gradient", _scale_gradient, [(2048, 1024), (2048, 1024)], _BF16, 2048),
]


def _inputs(shapes, dtype):
  rng = np.random.default_rng(0)
  if np.dtype(dtype).kind == "i":
    return [rng.integers(-1000, 1000, shape).astype(dtype) for shape in shapes]
  return [rng.standard_normal(shape).astype(dtype) for shape in shapes]


@pytest.mark.parametrize("name,f,shapes,dtype,terms", CASES, ids=[c[0] for c in CASES])
def test_both_cores_reduce_with_the_one_core_bits(name, f, shapes, dtype, terms):
  args = _inputs(shapes, dtype)
  # A sum of `terms` elements in any order: within the bound of `terms` products times one.
  harness.check(f, *args, lnc=2, bounds=sum_of_products_bounds(f, *args, terms=terms))
  runs = []
  for lnc in (1, 2):
    program = harness.compile_fn(f, *args, lnc=lnc)
    runs.append(harness.native().run_program(program, args))
  (one, one_profile), (two, two_profile) = runs
  assert [a.tobytes() for a in one] == [a.tobytes() for a in two], name
  second_core = [s for s, entry in two_profile["streams"].items()
                 if s.endswith("@1") and entry["instructions"]]
  assert second_core, f"{name}: nothing ran on the second core"


def test_a_small_or_full_reduction_stays_on_one_core():
  for f, shape in ((_sum0, (64, 32)), (jnp.sum, (1024, 1024))):
    args = _inputs([shape], np.float32)
    program = harness.compile_fn(f, *args, lnc=2)
    _, profile = harness.native().run_program(program, args)
    assert not any(s.endswith("@1") and e["instructions"] for s, e in profile["streams"].items())
