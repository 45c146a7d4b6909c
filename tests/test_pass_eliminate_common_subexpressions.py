"""eliminate-common-subexpressions (passes/eliminate_common_subexpressions.py): an op computing
what an earlier op of its block computes is dropped for it. The outputs keep the bits of the
program compiled without the pass, and what differs in any attribute, constant bit or effect
is kept."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

import compiler_harness as harness
from cpu_reference import assert_close
from hlo_lowering import importer, pipeline
from hlo_lowering.ir import Block, Function, Module, Op, Region, TensorType, Value, walk_ops
from hlo_lowering.passes import eliminate_common_subexpressions
from hlo_lowering.program import DType

_PASS = "eliminate-common-subexpressions"


def _ops(f, args, skipped=()) -> list[str]:
  module = importer.import_program(jax.jit(f).lower(*args).as_text().encode(), "mlir")
  pipeline.run_pipeline(module, passes=tuple(p for p in pipeline.PASSES if p.name not in skipped))
  return [op.name for op in walk_ops(module.main.body)]


def _run(f, args, skipped=()):
  program = harness.compile_without(f, args, skipped)
  return harness.native().run_program(program, [np.asarray(a) for a in args])[0]


def test_the_gelu_backward_squares_x_once_with_the_bits_of_both_squares(cpu):
  rng = np.random.default_rng(0)
  x, g = (rng.standard_normal((256, 512)).astype(ml_dtypes.bfloat16) for _ in range(2))
  merged = _ops(harness.gelu_forward_and_backward, [x, g]).count("stablehlo.multiply")
  assert merged == _ops(harness.gelu_forward_and_backward, [x, g], (_PASS,)).count(
      "stablehlo.multiply") - 1
  outputs = _run(harness.gelu_forward_and_backward, [x, g])
  assert [a.tobytes() for a in outputs] == [
      a.tobytes() for a in _run(harness.gelu_forward_and_backward, [x, g], (_PASS,))]
  expected = [np.asarray(a) for a in jax.jit(harness.gelu_forward_and_backward)(
      *(jax.device_put(a, cpu) for a in (x, g)))]
  assert_close(outputs, expected)


def _repeats(x):
  a, b = jnp.exp(x * 3), jnp.exp(x * 3)
  return a, b, a + b


def test_a_chain_of_repeats_merges_link_by_link_and_a_repeated_output_is_stored_once(cpu):
  # One cluster (both chains feed the add): its constants, multiplies and exponentials merge,
  # and the fusion that returned a and b returns one value for both.
  f = _repeats
  x = np.random.default_rng(2).standard_normal((128, 96)).astype(np.float32)
  ops = _ops(f, [x])
  assert ops.count("stablehlo.exponential") == 1 and ops.count("stablehlo.multiply") == 1
  outputs = _run(f, [x])
  assert [a.tobytes() for a in outputs] == [a.tobytes() for a in _run(f, [x], (_PASS,))]
  expected = [np.asarray(a) for a in jax.jit(f)(jax.device_put(x, cpu))]
  assert_close(outputs, expected)


def test_repeats_in_different_fusions_stay_in_each():
  # Merged, the value would cross HBM from one fusion to the other.
  f = lambda x: (jnp.exp(x * 3) * 2, jnp.exp(x * 3) - 1)  # noqa: E731
  ops = _ops(f, [jnp.zeros((64, 64), jnp.float32)])
  assert ops.count("trn.fusion") == 2 and ops.count("stablehlo.exponential") == 2


def test_ops_that_differ_in_an_attribute_or_a_constant_bit_are_kept(cpu):
  # x + 0.0 and x + (−0.0) differ only in the constant's sign bit: at x = −0 IEEE addition
  # gives +0 and −0. (XLA's CPU backend simplifies x + 0.0 to x, so it is no reference here.)
  # x < 1 and x > 1 differ only in comparison_direction.
  f = lambda x: (x + 0.0, x + -0.0, x < 1, x > 1)  # noqa: E731
  x = np.array([-0.0, 0.5, 2.0, -3.0], np.float32)
  plus_zero, minus_zero, less, greater = _run(f, [x])
  assert np.signbit(minus_zero[0]) and not np.signbit(plus_zero[0])
  assert [a.tobytes() for a in (plus_zero, minus_zero, less, greater)] == [
      a.tobytes() for a in _run(f, [x], (_PASS,))]
  expected = [np.asarray(a) for a in jax.jit(f)(jax.device_put(x, cpu))]
  assert_close([less, greater], expected[2:])


def test_ops_with_effects_are_never_merged():
  t = TensorType((4,), DType.F32)
  x, arg = Value(t), Value(t)
  ops = [Op(name, [arg], [t], attrs) for name, attrs in [
      ("stablehlo.custom_call", {"call_target_name": "host_callback"}),
      ("stablehlo.custom_call", {"call_target_name": "host_callback"}),
      ("stablehlo.rng", {}), ("stablehlo.rng", {}),
      ("stablehlo.negate", {}), ("stablehlo.negate", {})]]
  region = Block([arg], ops + [Op("stablehlo.return", [op.result for op in ops], [])])
  fusion = Op("trn.fusion", [x], [t] * len(ops), {"fused_ops": len(ops)}, [Region(region)])
  ret = Op("func.return", fusion.results, [])
  module = Module({"main": Function("main", Block([x], [fusion, ret]), [t] * len(ops))})
  eliminate_common_subexpressions.run(module)
  assert [op.name for op in region.ops] == [
      "stablehlo.custom_call", "stablehlo.custom_call", "stablehlo.rng", "stablehlo.rng",
      "stablehlo.negate", "stablehlo.return"]
  assert len(fusion.results) == 5 and fusion.attrs["fused_ops"] == 5
  assert module.main.returned == fusion.results + [fusion.results[4]]
