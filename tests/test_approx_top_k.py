"""lax.approx_max_k / approx_min_k (custom_call @ApproxTopK in JAX's fallback form) as
expand-approx-top-k rewrites it: the exact top k by a sort, equal to JAX's CPU backend, on one
core and inside a shard_map over several."""

import numpy as np
import pytest

import jax
import jax.numpy as jnp
from jax import shard_map
from jax.sharding import Mesh, PartitionSpec as P

from hlo_lowering.errors import CompileError
import compiler_harness as harness

_X = np.random.RandomState(7).permutation(96).astype(np.float32).reshape(4, 24) * 0.25 - 9.0


@pytest.mark.parametrize("k, dim", [(3, 1), (2, 0), (1, 1)])
def test_approx_max_k_is_the_exact_top_k(k, dim):
  harness.check(lambda x: jax.lax.approx_max_k(x, k, reduction_dimension=dim), _X)


def test_approx_min_k_is_the_exact_bottom_k():
  harness.check(lambda x: jax.lax.approx_min_k(x, 4), _X.astype(jnp.bfloat16))


def test_approx_max_k_inside_shard_map_runs_on_each_cores_rows():
  def run(platform):
    mesh = Mesh(np.array(jax.devices(platform)[:4]), ("i",))
    f = shard_map(lambda x: jax.lax.approx_max_k(x, 2), mesh=mesh, in_specs=P("i"),
                  out_specs=P("i"))
    return jax.jit(f)(_X)

  for got, want in zip(run("trn"), run("cpu")):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_a_call_not_in_the_fallback_form_is_refused_naming_it():
  text = jax.jit(lambda x: jax.lax.approx_max_k(x, 3)).lower(_X).as_text()
  assert "is_fallback = true" in text
  with pytest.raises(CompileError, match=r"custom_call @ApproxTopK other than JAX's fallback"):
    harness.compile_code(text.replace("is_fallback = true", "is_fallback = false").encode())
