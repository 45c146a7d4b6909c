"""The HLO forms torch_xla emits, compiled from HloModuleProtos without torch: Python numbers as
float64 scalars (narrow-float64), any/all reduction bodies over pred (canonicalize's
truth-table reducer) and vector-indexed dynamic slices (legacy_index_vectors).

The protos come from StableHLO text through jaxlib's MLIR → HLO converter, which emits the same
HLO instructions torch_xla's lowering does; tests/test_torch_xla.py runs them through torch_xla.
"""

import numpy as np
import pytest

import compiler_harness as harness
from hlo_lowering import legacy_index_vectors
from hlo_lowering.errors import CompileError


def _proto(mlir_text: str) -> bytes:
  from jax._src.lib import _jax
  computation = _jax.mlir.mlir_module_to_xla_computation(mlir_text, use_tuple_args=False,
                                                         return_tuple=False)
  return computation.as_serialized_hlo_module_proto()


_X = np.array([-1.5, 0.1, 0.5, np.float32(0.1), 2.0, -0.0, np.inf, 0.30000001], np.float32)

# x > 0.5 and addcmul(x, x, x, value=0.3), as torch_xla writes them: the number is an f64[]
# argument, the tensor is converted to f64 to compare, and 1 - s is computed in f64.
_SCALAR_PROGRAM = """
func.func @main(%s: tensor<f64>, %x: tensor<8xf32>) -> (tensor<8xi1>, tensor<8xf32>) {
  %0 = stablehlo.convert %x : (tensor<8xf32>) -> tensor<8xf64>
  %1 = stablehlo.broadcast_in_dim %s, dims = [] : (tensor<f64>) -> tensor<8xf64>
  %2 = stablehlo.compare GT, %0, %1 : (tensor<8xf64>, tensor<8xf64>) -> tensor<8xi1>
  %one = stablehlo.constant dense<1.0> : tensor<f64>
  %3 = stablehlo.subtract %one, %s : tensor<f64>
  %4 = stablehlo.convert %3 : (tensor<f64>) -> tensor<f32>
  %5 = stablehlo.broadcast_in_dim %4, dims = [] : (tensor<f32>) -> tensor<8xf32>
  %6 = stablehlo.multiply %x, %x : tensor<8xf32>
  %7 = stablehlo.multiply %6, %5 : tensor<8xf32>
  %8 = stablehlo.add %x, %7 : tensor<8xf32>
  return %2, %8 : tensor<8xi1>, tensor<8xf32>
}"""


@pytest.mark.parametrize("number", [0.5, 0.1, 0.3, 1e-8])
def test_python_number_runs_as_the_float32_it_rounds_to(number):
  harness.native()
  program = harness.compile_code(_proto(_SCALAR_PROGRAM), "hlo")
  greater, addcmul = harness.run_program(program, [np.float64(number), _X])
  s = np.float32(number)  # the DMA that loads the argument rounds to nearest even
  np.testing.assert_array_equal(greater, _X > s)
  one_minus = np.float32(1) - s
  np.testing.assert_array_equal(addcmul, _X + (_X * _X) * one_minus)


def test_number_narrowing_is_visible_at_a_boundary():
  """0.1 in f64 lies above f32(0.1): torch on the CPU says f32(0.1) > 0.1 is False, and so does
  trn, because both sides round to the same f32 (as torch_xla does for PJRT_DEVICE=NEURON).
  0.30000001 (f32) is above 0.3 (f64) but equal to f32(0.3): the CPU says True, trn False."""
  harness.native()
  program = harness.compile_code(_proto(_SCALAR_PROGRAM), "hlo")
  greater = harness.run_program(program, [np.float64(0.3), _X])[0]
  assert bool(_X[7].astype(np.float64) > 0.3) and not greater[7]


def test_float64_tensor_from_pytorch_is_refused_naming_the_op():
  vector = """
  func.func @main(%v: tensor<8xf64>, %x: tensor<8xf32>) -> tensor<8xf32> {
    %0 = stablehlo.convert %v : (tensor<8xf64>) -> tensor<8xf32>
    %1 = stablehlo.add %0, %x : tensor<8xf32>
    return %1 : tensor<8xf32>
  }"""
  with pytest.raises(CompileError, match=r"stablehlo.convert\(tensor<8xf64>\).*float64 tensor"
                                         r".*\.float\(\)") as info:
    harness.compile_code(_proto(vector), "hlo")
  assert info.value.code == "UNIMPLEMENTED"


def test_float64_program_result_is_refused():
  result = """
  func.func @main(%s: tensor<f64>) -> tensor<f64> {
    %0 = stablehlo.add %s, %s : tensor<f64>
    return %0 : tensor<f64>
  }"""
  with pytest.raises(CompileError, match=r"result 0 of the program is float64"):
    harness.compile_code(_proto(result), "hlo")


def test_constant_of_several_float64_values_is_refused():
  constant = """
  func.func @main(%x: tensor<2xf32>) -> tensor<2xi1> {
    %c = stablehlo.constant dense<[0.1, 0.2]> : tensor<2xf64>
    %0 = stablehlo.convert %x : (tensor<2xf32>) -> tensor<2xf64>
    %1 = stablehlo.compare LT, %0, %c : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xi1>
    return %1 : tensor<2xi1>
  }"""
  with pytest.raises(CompileError, match="constant of several float64 values"):
    harness.compile_code(_proto(constant), "hlo")


def test_jax_float64_stays_refused():
  """Only programs from HloModuleProtos (torch_xla) are narrowed: the same StableHLO from JAX
  (jax_enable_x64) keeps check-supported's error."""
  with pytest.raises(CompileError, match="no float64"):
    harness.compile_code(_SCALAR_PROGRAM.encode())


# torch_xla's any/all body: select(or(x != false, y != false), true, false).
_BOOL_REDUCE = """
func.func @main(%x: tensor<4x8xf32>) -> tensor<4xi1> {
  %zero = stablehlo.constant dense<0.0> : tensor<4x8xf32>
  %p = stablehlo.compare GT, %x, %zero : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
  %init = stablehlo.constant dense<INIT> : tensor<i1>
  %r = stablehlo.reduce(%p init: %init) across dimensions = [1] : (tensor<4x8xi1>, tensor<i1>) -> tensor<4xi1>
   reducer(%a: tensor<i1>, %b: tensor<i1>) {
    %f = stablehlo.constant dense<false> : tensor<i1>
    %t = stablehlo.constant dense<true> : tensor<i1>
    %na = stablehlo.compare NE, %a, %f : (tensor<i1>, tensor<i1>) -> tensor<i1>
    %nb = stablehlo.compare NE, %b, %f : (tensor<i1>, tensor<i1>) -> tensor<i1>
    %c = stablehlo.OP %na, %nb : tensor<i1>
    %s = stablehlo.select %c, %t, %f : tensor<i1>, tensor<i1>
    stablehlo.return %s : tensor<i1>
  }
  return %r : tensor<4xi1>
}"""


@pytest.mark.parametrize("op, init, expected", [("or", "false", np.any), ("and", "true", np.all)])
def test_torch_any_all_bodies_reduce_on_gpsimd(op, init, expected):
  harness.native()
  x = np.array([[-1] * 8, [1] * 8, [-1] * 7 + [1], [1] * 7 + [-1]], np.float32)
  program = harness.compile_code(_proto(_BOOL_REDUCE.replace("OP", op).replace("INIT", init)),
                                 "hlo")
  np.testing.assert_array_equal(harness.run_program(program, [x])[0], expected(x > 0, axis=1))


def test_pred_body_that_is_no_reducer_runs_as_a_region_program():
  # and(acc, acc): no reducer, the accumulator keeps its init; a region program folds it.
  harness.native()
  body = _BOOL_REDUCE.replace("%c = stablehlo.OP %na, %nb", "%c = stablehlo.and %na, %na")
  program = harness.compile_code(_proto(body.replace("INIT", "true")), "hlo")
  x = np.array([[-1] * 8, [1] * 8, [-1] * 7 + [1], [1] * 7 + [-1]], np.float32)
  np.testing.assert_array_equal(harness.run_program(program, [x])[0], np.ones(4, bool))


# randperm's shuffle step as hlo_to_stablehlo converts it: one s64[1] index vector.
_VECTOR_INDEXED = '''    %20 = "stablehlo.dynamic_slice"(%arg10, %19) <{slice_sizes = array<i64: 1>}> : (tensor<8xi64>, tensor<1xi64>) -> tensor<1xi64> loc(#loc5)
    %23 = "stablehlo.dynamic_update_slice"(%21, %22, %19) : (tensor<8xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<8xi64> loc(#loc8)
    %24 = "stablehlo.dynamic_slice"(%arg10, %arg9) <{slice_sizes = array<i64: 1>}> : (tensor<8xi64>, tensor<i64>) -> tensor<1xi64> loc(#loc7)'''


def test_vector_indexed_dynamic_slices_get_one_scalar_index_per_dim():
  text, rewritten = legacy_index_vectors.scalar_indices(_VECTOR_INDEXED)
  assert rewritten == 2
  lines = [line.strip() for line in text.splitlines()]
  assert lines[-1] == _VECTOR_INDEXED.splitlines()[-1].strip()  # scalar indices already: unchanged
  assert ('%20 = "stablehlo.dynamic_slice"(%arg10, %trn_index_20_0) <{slice_sizes = '
          'array<i64: 1>}> : (tensor<8xi64>, tensor<i64>) -> tensor<1xi64> loc(#loc5)') in lines
  assert ('%23 = "stablehlo.dynamic_update_slice"(%21, %22, %trn_index_23_0) : (tensor<8xi64>, '
          'tensor<1xi64>, tensor<i64>) -> tensor<8xi64> loc(#loc8)') in lines
  assert ('%trn_index_20_0 = "stablehlo.reshape"(%trn_index_20_0_slice) : (tensor<1xi64>) -> '
          'tensor<i64> loc(#loc5)') in lines


def test_any_body_using_constants_from_outside_reduces():
  """torch_xla's StableHLO (XLA_STABLEHLO_COMPILE=1) writes the any body with the true/false
  constants of the enclosing function: the truth table reads them from there."""
  harness.native()
  text = """
  func.func @main(%x: tensor<4x8xf32>) -> tensor<i1> {
    %t = stablehlo.constant dense<true> : tensor<i1>
    %f = stablehlo.constant dense<false> : tensor<i1>
    %zero = stablehlo.constant dense<0.0> : tensor<4x8xf32>
    %p = stablehlo.compare GT, %x, %zero : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
    %r = stablehlo.reduce(%p init: %f) across dimensions = [0, 1] : (tensor<4x8xi1>, tensor<i1>) -> tensor<i1>
     reducer(%a: tensor<i1>, %b: tensor<i1>) {
      %c = stablehlo.or %a, %b : tensor<i1>
      %s = stablehlo.select %c, %t, %f : tensor<i1>, tensor<i1>
      stablehlo.return %s : tensor<i1>
    }
    return %r : tensor<i1>
  }"""
  program = harness.compile_code(text.encode())
  for x in (np.full((4, 8), -1, np.float32), np.eye(4, 8, dtype=np.float32)):
    assert harness.run_program(program, [x])[0] == np.any(x > 0)


@pytest.mark.parametrize("combine", ["or", "and"])
def test_bool_scatter_with_or_and_bodies(combine):
  """torch_xla's scatter_add on bools combines with `or` (on 0/1: max; and: min)."""
  harness.native()
  text = f"""
  func.func @main(%x: tensor<5xi1>, %i: tensor<3x1xi32>, %u: tensor<3xi1>) -> tensor<5xi1> {{
    %r = "stablehlo.scatter"(%x, %i, %u) ({{
      ^bb0(%a: tensor<i1>, %b: tensor<i1>):
        %c = stablehlo.{combine} %a, %b : tensor<i1>
        stablehlo.return %c : tensor<i1>
    }}) {{scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0],
         scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}}
      : (tensor<5xi1>, tensor<3x1xi32>, tensor<3xi1>) -> tensor<5xi1>
    return %r : tensor<5xi1>
  }}"""
  program = harness.compile_code(text.encode())
  x = np.array([False, True, False, True, True])
  i = np.array([[0], [1], [0]], np.int32)
  u = np.array([True, False, False])
  expected = x.copy()
  for (k,), v in zip(i, u):
    expected[k] = (expected[k] or v) if combine == "or" else (expected[k] and v)
  np.testing.assert_array_equal(harness.run_program(program, [x, i, u])[0], expected)


# torch_xla's aten.any / aten.all of a float or integer tensor: the reduce runs on the tensor
# itself, and its body normalises each side with != 0 (expand-truth-reduce).
_TRUTH_REDUCE = """
func.func @main(%x: tensor<4x8xT>) -> tensor<4xT> {
  %init = stablehlo.constant dense<INIT> : tensor<T>
  %r = stablehlo.reduce(%x init: %init) across dimensions = [1] : (tensor<4x8xT>, tensor<T>) -> tensor<4xT>
   reducer(%a: tensor<T>, %b: tensor<T>) {
    %zero = stablehlo.constant dense<0> : tensor<T>
    %one = stablehlo.constant dense<1> : tensor<T>
    %na = stablehlo.compare NE, %a, %zero : (tensor<T>, tensor<T>) -> tensor<i1>
    %nb = stablehlo.compare NE, %b, %zero : (tensor<T>, tensor<T>) -> tensor<i1>
    %c = stablehlo.OP %na, %nb : tensor<i1>
    %s = stablehlo.select %c, %one, %zero : tensor<i1>, tensor<T>
    stablehlo.return %s : tensor<T>
  }
  return %r : tensor<4xT>
}"""


@pytest.mark.parametrize("dtype, element", [(np.float32, "f32"), (np.int32, "i32")])
@pytest.mark.parametrize("op, init, expected", [("or", 0, np.any), ("and", 1, np.all)])
def test_any_all_of_a_number_tensor_is_a_bool_reduce(dtype, element, op, init, expected):
  harness.native()
  text = _TRUTH_REDUCE.replace("INIT", str(float(init)) if element == "f32" else str(init))
  text = text.replace("T>", f"{element}>").replace("OP", op)
  text = text.replace("dense<0>", "dense<0.0>" if element == "f32" else "dense<0>")
  text = text.replace("dense<1>", "dense<1.0>" if element == "f32" else "dense<1>")
  program = harness.compile_code(text.encode())
  x = np.array([[0] * 8, [2.5, -1, 3, 7, 1, 1, 4, -2], [0] * 7 + [-3], [5] * 7 + [0]]).astype(dtype)
  result = harness.run_program(program, [x])[0]
  np.testing.assert_array_equal(result, expected(x != 0, axis=1).astype(dtype))
