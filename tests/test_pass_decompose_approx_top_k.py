"""decompose-approx-top-k: lax.approx_max_k / approx_min_k (JAX's ApproxTopK fallback custom call)
run as the exact top k, equal to JAX's CPU backend: values bit for bit, indices exactly (the
inputs hold no ties), on one core and inside a shard_map over several."""

import textwrap

import jax
import ml_dtypes
import numpy as np
import pytest
from jax.sharding import Mesh, PartitionSpec as P

from cpu_reference import assert_matches_cpu
from hlo_lowering import importer, verifier
from hlo_lowering.errors import CompileError
from hlo_lowering.passes import decompose_approx_top_k


def _distinct(shape, dtype, seed=0):
  """Values without ties in any dtype (a permutation of exactly representable integers)."""
  values = np.random.default_rng(seed).permutation(np.prod(shape)).reshape(shape) - 40
  return values.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
@pytest.mark.parametrize("is_max", [True, False])
@pytest.mark.parametrize("shape, k, dim", [((4, 64), 5, 1), ((3, 7, 10), 3, 1),
                                           ((130,), 17, 0)])
def test_approx_top_k_is_the_exact_top_k(trn, cpu, dtype, is_max, shape, k, dim):
  approx = jax.lax.approx_max_k if is_max else jax.lax.approx_min_k
  assert_matches_cpu(lambda x: approx(x, k, reduction_dimension=dim), _distinct(shape, dtype),
                     trn=trn, cpu=cpu)


def test_unaggregated_approx_top_k_and_under_vmap(trn, cpu):
  x = _distinct((6, 40), np.float32, seed=1)
  assert_matches_cpu(lambda x: jax.lax.approx_min_k(x, 3, reduction_dimension=0,
                                                    aggregate_to_topk=False), x, trn=trn, cpu=cpu)
  assert_matches_cpu(jax.vmap(lambda r: jax.lax.approx_max_k(r, 4)), x, trn=trn, cpu=cpu)


def test_approx_top_k_inside_shard_map_runs_on_each_cores_rows():
  x = _distinct((4, 24), np.float32, seed=2)

  def run(platform):
    mesh = Mesh(np.array(jax.devices(platform)[:4]), ("i",))
    f = jax.shard_map(lambda x: jax.lax.approx_max_k(x, 2), mesh=mesh, in_specs=P("i"),
                      out_specs=P("i"))
    return jax.jit(f)(x)

  for got, want in zip(run("trn"), run("cpu")):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


_TPU_FORM = """
  func.func @cmp(%a: tensor<f32>, %b: tensor<f32>, %i: tensor<i32>, %j: tensor<i32>) -> tensor<i1> {
    %0 = stablehlo.compare GT, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %0 : tensor<i1>
  }
  func.func public @main(%x: tensor<4x64xf32>) -> (tensor<4x5xf32>, tensor<4x5xi32>) {
    %0 = stablehlo.iota dim = 1 : tensor<4x64xi32>
    %c = stablehlo.constant dense<-1> : tensor<i32>
    %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %1:2 = stablehlo.custom_call @ApproxTopK(%x, %0, %cst, %c) {called_computations = [@cmp],
        mhlo.backend_config = {aggregate_to_topk = true, is_fallback = FALLBACK,
        recall_target = 0.95 : f32, reduction_dim = 1 : i64,
        reduction_input_size_override = -1 : i64, top_k = 5 : i64}}
        : (tensor<4x64xf32>, tensor<4x64xi32>, tensor<f32>, tensor<i32>)
        -> (tensor<4x5xf32>, tensor<4x5xi32>)
    return %1#0, %1#1 : tensor<4x5xf32>, tensor<4x5xi32>
  }"""


def _module(fallback: str):
  text = textwrap.dedent(_TPU_FORM).replace("FALLBACK", fallback)
  return importer.import_program(text.encode(), "mlir")


def test_the_fallback_form_becomes_a_sort_and_slices():
  module = _module("true")
  decompose_approx_top_k.run(module)
  verifier.verify_module(module, "decompose-approx-top-k")
  names = [op.name for op in module.main.body.ops]
  assert "stablehlo.custom_call" not in names
  assert names.count("stablehlo.sort") == 1 and names.count("stablehlo.slice") == 2


def test_tpus_approximate_form_is_refused_by_name():
  with pytest.raises(CompileError, match="ApproxTopK without is_fallback is TPU's"):
    decompose_approx_top_k.run(_module("false"))
