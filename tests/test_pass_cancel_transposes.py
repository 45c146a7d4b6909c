"""cancel-transposes: IR in / IR out, and attention's k gradient (JAX's transpose, unit-dim
broadcast, transpose chain) against the JAX CPU backend and the program without the pass."""

import textwrap

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

import compiler_harness as harness
from cpu_reference import sum_of_products_bounds
from hlo_lowering import importer, ir_printer, pipeline, verifier
from hlo_lowering.passes import cancel_transposes
from jax_trn import compilation


def _cancel(text):
  module = importer.import_program(textwrap.dedent(text).encode(), "mlir")
  cancel_transposes.run(module)
  verifier.verify_module(module, "cancel-transposes")
  return module


def test_transposes_undone_through_a_unit_broadcast_become_a_reshape():
  module = _cancel("""
  func.func @main(%a: tensor<4x8x16xf32>) -> tensor<1x4x8x16xf32> {
    %0 = stablehlo.transpose %a, dims = [0, 2, 1] : (tensor<4x8x16xf32>) -> tensor<4x16x8xf32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [1, 2, 3] : (tensor<4x16x8xf32>) -> tensor<1x4x16x8xf32>
    %2 = stablehlo.transpose %1, dims = [0, 1, 3, 2] : (tensor<1x4x16x8xf32>) -> tensor<1x4x8x16xf32> loc("jit(f)/transpose"("f.py":9:1))
    return %2 : tensor<1x4x8x16xf32>
  }""")
  # The chain's ops stay for canonicalize to remove; the result is a reshape of %a.
  assert ir_printer.format_module(module) == textwrap.dedent("""\
      func public @main
        ^(%0: tensor<4x8x16xf32>):
          %1 = stablehlo.transpose(%0) {permutation = [0, 2, 1]} : tensor<4x16x8xf32>
          %2 = stablehlo.broadcast_in_dim(%1) {broadcast_dimensions = [1, 2, 3]} : tensor<1x4x16x8xf32>
          %3 = stablehlo.reshape(%0) : tensor<1x4x8x16xf32>  // jit(f)/transpose at f.py:9:1
          func.return(%3)
      """)


def test_transposes_through_a_unit_reshape_cancel_and_others_are_left():
  module = _cancel("""
  func.func @main(%a: tensor<8x16xf32>) -> (tensor<16x1x8xf32>, tensor<8x16xf32>, tensor<16x8xf32>) {
    %0 = stablehlo.transpose %a, dims = [1, 0] : (tensor<8x16xf32>) -> tensor<16x8xf32>
    %1 = stablehlo.reshape %0 : (tensor<16x8xf32>) -> tensor<16x1x8xf32>
    %2 = stablehlo.transpose %1, dims = [2, 1, 0] : (tensor<16x1x8xf32>) -> tensor<8x1x16xf32>
    %3 = stablehlo.reshape %2 : (tensor<8x1x16xf32>) -> tensor<8x16xf32>
    %4 = stablehlo.transpose %1, dims = [0, 1, 2] : (tensor<16x1x8xf32>) -> tensor<16x1x8xf32>
    %5 = stablehlo.negate %3 : tensor<8x16xf32>
    %6 = stablehlo.transpose %5, dims = [1, 0] : (tensor<8x16xf32>) -> tensor<16x8xf32>
    return %4, %3, %6 : tensor<16x1x8xf32>, tensor<8x16xf32>, tensor<16x8xf32>
  }""")
  ops = module.main.body.ops
  a = module.main.args[0]
  # %2 holds %a's elements in order; %4 keeps %0's order (the dims of size one aside); the
  # transpose of the negate (not data movement) and the first transpose stay.
  assert [op.name for op in ops] == [
      "stablehlo.transpose", "stablehlo.reshape", "stablehlo.reshape", "stablehlo.reshape",
      "stablehlo.reshape", "stablehlo.negate", "stablehlo.transpose", "func.return"]
  assert ops[2].operands == [a] and ops[2].result.shape == (8, 1, 16)
  assert ops[4].operands == [ops[0].result]


def test_runs_before_canonicalize_and_fold_transpose_into_dot():
  names = [p.name for p in pipeline.PASSES]
  i = names.index("cancel-transposes")
  assert names[i + 1:i + 3] == ["canonicalize", "fold-transpose-into-dot"]


# --- attention's k gradient, compared with the JAX CPU backend ------------------------------

def _k_gradient(q, dy):
  """The cotangent of k through `q @ kᵀ` with a batch dim of one, as attention computes it."""
  scores = lambda k: q @ k.transpose(0, 1, 3, 2)
  return jax.vjp(scores, jnp.zeros_like(q))[1](dy)[0] * 2.0


def _inputs(dtype):
  rng = np.random.default_rng(3)
  return tuple(rng.standard_normal(shape).astype(dtype)
               for shape in ((1, 4, 256, 64), (1, 4, 256, 256)))


def _without_pass(monkeypatch):
  without = tuple(p for p in pipeline.PASSES if p.name != "cancel-transposes")
  run_pipeline = pipeline.run_pipeline
  monkeypatch.setattr(pipeline, "run_pipeline",
                      lambda module, tag="0": run_pipeline(module, tag, passes=without))


def test_attention_k_gradient_has_no_transpose_copy_and_equals_the_unpassed_program(
    monkeypatch):
  args = _inputs(ml_dtypes.bfloat16)
  program = harness.check(_k_gradient, *args,
                          bounds=sum_of_products_bounds(_k_gradient, *args, terms=256))
  moving = [o for o in compilation.last_report().ops
            if o.op == "stablehlo.transpose" and o.instructions]
  assert not moving, compilation.last_report().format()
  inputs = [np.asarray(a) for a in args]
  passed, profile = harness.native().run_program(program, inputs)

  _without_pass(monkeypatch)
  unpassed, unpassed_profile = harness.native().run_program(
      harness.compile_fn(_k_gradient, *args), inputs)
  assert [o.op for o in compilation.last_report().gpsimd_ops()] == ["stablehlo.transpose"]
  np.testing.assert_array_equal(np.asarray(passed[0]), np.asarray(unpassed[0]))
  print(f"k gradient modeled device time: {unpassed_profile['device_time_ns'] / 1e3:.1f} us "
        f"without the pass, {profile['device_time_ns'] / 1e3:.1f} us with it")
  assert profile["device_time_ns"] < unpassed_profile["device_time_ns"]


def test_a_chain_from_an_op_of_several_results_is_left():
  """The walk back stops at any op that is not element-preserving data movement, also one with
  several results (a while loop's: the triangular solve's decomposition)."""
  module = _cancel("""
  func.func @main(%a: tensor<8x16xf32>) -> tensor<8x16xf32> {
    %s:2 = "stablehlo.sort"(%a, %a) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>, %u: tensor<f32>, %v: tensor<f32>):
      %c = stablehlo.compare LT, %x, %y : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
    }) {dimension = 1 : i64, is_stable = false} : (tensor<8x16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>)
    %0 = stablehlo.transpose %s#0, dims = [1, 0] : (tensor<8x16xf32>) -> tensor<16x8xf32>
    %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<16x8xf32>) -> tensor<8x16xf32>
    return %1 : tensor<8x16xf32>
  }""")
  ops = module.main.body.ops
  assert [op.name for op in ops] == ["stablehlo.sort", "stablehlo.transpose", "stablehlo.reshape",
                                     "func.return"]
  assert ops[2].operands == [ops[0].results[0]]
