"""stack-tuple-all-to-all: HLO's tuple all-to-all (torch_xla's xm.all_to_all) becomes one array
stablehlo.all_to_all over the stacked operands; tests/test_torch_xla_multi_device.py runs it
between cores against the CPU."""

import pytest

import compiler_harness as harness
from hlo_lowering import importer, verifier
from hlo_lowering.errors import CompileError
from hlo_lowering.ir import Block, Function, Module, Op, TensorType, Value, walk_ops
from hlo_lowering.passes.collectives import stack_tuple_all_to_all
from hlo_lowering.program import DType

_TUPLE_ALL_TO_ALL = """
func.func @main(%a: tensor<2x6xf32>, %b: tensor<2x6xf32>) -> (tensor<2x6xf32>, tensor<2x6xf32>) {
  %0:2 = "mhlo.all_to_all"(%a, %b) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}
      : (tensor<2x6xf32>, tensor<2x6xf32>) -> (tensor<2x6xf32>, tensor<2x6xf32>)
  return %0#0, %0#1 : tensor<2x6xf32>, tensor<2x6xf32>
}"""


def _proto() -> bytes:
  from jax._src.lib import _jax
  computation = _jax.mlir.mlir_module_to_xla_computation(_TUPLE_ALL_TO_ALL, use_tuple_args=False,
                                                         return_tuple=False)
  return computation.as_serialized_hlo_module_proto()


def test_tuple_all_to_all_becomes_one_array_all_to_all_over_the_stacked_operands():
  module = importer.import_program(_proto(), "hlo")
  stack_tuple_all_to_all.run(module)
  verifier.verify_module(module, "stack-tuple-all-to-all")
  ops = list(walk_ops(module.main.body))
  assert not [op for op in ops if op.name == "mhlo.all_to_all"]
  (exchange,) = [op for op in ops if op.name == "stablehlo.all_to_all"]
  assert exchange.operands[0].shape == (2, 2, 6) and exchange.results[0].shape == (2, 2, 6)
  assert (exchange.attrs["split_dimension"], exchange.attrs["concat_dimension"],
          exchange.attrs["split_count"]) == (0, 0, 2)
  assert exchange.attrs["replica_groups"].tolist() == [[0, 1]]
  assert [op.name for op in ops].count("stablehlo.slice") == 2
  assert [v.shape for v in module.main.returned] == [(2, 6), (2, 6)]


def test_tuple_all_to_all_compiles_for_two_replicas():
  assert harness.compile_code(_proto(), "hlo", num_replicas=2)


def test_operands_of_different_shapes_are_refused_naming_the_op():
  a, b = Value(TensorType((2, 6), DType.F32)), Value(TensorType((3, 6), DType.F32))
  op = Op("mhlo.all_to_all", [a, b], [a.type, b.type])
  ret = Op("func.return", op.results, [])
  module = Module({"main": Function("main", Block([a, b], [op, ret]), [a.type, b.type])})
  with pytest.raises(CompileError, match=r"mhlo\.all_to_all.*one shape and dtype"):
    stack_tuple_all_to_all.run(module)
