"""decompose-cholesky, decompose-triangular-solve and decompose-householder-qr on IR: each op
becomes one while loop of n steps (so compile time does not grow with n), nothing of the op is
left, the new ops keep its location, inputs they do not take are CompileErrors naming the op, and
other custom calls are left for check-supported."""

import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import compiler_harness as harness
from hlo_lowering import importer, ir_printer
from hlo_lowering.errors import CompileError
from hlo_lowering.ir import walk_ops
from hlo_lowering.passes import (decompose_cholesky, decompose_householder_qr,
                                 decompose_triangular_solve)


def _module(f, *args):
  return importer.import_program(harness.artifact(f, *args), "mlir")


def _text_module(body: str, args: str, results: str):
  return importer.import_program(
      f"func.func @main({args}) -> {results} {{\n{body}\n}}\n".encode(), "mlir")


def _whiles(module):
  return [op for op in walk_ops(module.main.body) if op.name == "stablehlo.while"]


@pytest.mark.parametrize("name,f,decompose", [
    ("stablehlo.cholesky", jax.lax.linalg.cholesky, decompose_cholesky.run),
    ("stablehlo.triangular_solve",
     lambda a: jax.lax.linalg.triangular_solve(a, a, left_side=True, lower=True),
     decompose_triangular_solve.run),
], ids=["cholesky", "triangular_solve"])
def test_op_becomes_one_loop_of_n_steps_with_its_location(name, f, decompose):
  module = _module(f, jnp.ones((3, 40, 40)))
  (op,) = [o for o in walk_ops(module.main.body) if o.name == name]
  before = set(map(id, walk_ops(module.main.body)))
  decompose(module)
  assert name not in ir_printer.format_module(module)
  (loop,) = _whiles(module)
  condition = loop.regions[0].block.ops
  trips = [o.attrs["value"] for o in condition if o.name == "stablehlo.constant"]
  assert [int(t) for t in trips] == [40]
  new = [o for o in walk_ops(module.main.body) if id(o) not in before]
  assert new and all(o.loc == op.loc for o in new)


def test_qr_custom_calls_become_loops():
  module = _module(lambda a: jnp.linalg.qr(a), jnp.ones((2, 9, 5)))
  module_text = ir_printer.format_module(module)
  assert "'Qr'" in module_text and "ProductOfElementaryHouseholderReflectors" in module_text
  from hlo_lowering.passes import inline_calls
  inline_calls.run(module)
  decompose_householder_qr.run(module)
  text = ir_printer.format_module(module)
  assert "custom_call" not in text
  assert len(_whiles(module)) == 2  # geqrf over 5 columns, the product over 5 reflectors


def test_other_custom_calls_are_left_for_check_supported():
  module = _text_module(
      '  %0 = stablehlo.custom_call @my_kernel(%a) : (tensor<4x4xf32>) -> tensor<4x4xf32>\n'
      '  return %0 : tensor<4x4xf32>', "%a: tensor<4x4xf32>", "tensor<4x4xf32>")
  decompose_householder_qr.run(module)
  assert "my_kernel" in ir_printer.format_module(module)


@pytest.mark.parametrize("body,args,results", [
    ('  %0:2 = stablehlo.custom_call @Qr(%a) : (tensor<4x4xi32>) -> '
     '(tensor<4x4xi32>, tensor<4xi32>)\n  return %0#0 : tensor<4x4xi32>',
     "%a: tensor<4x4xi32>", "tensor<4x4xi32>"),
    ('  %0 = stablehlo.custom_call @ProductOfElementaryHouseholderReflectors(%a, %t) : '
     '(tensor<4x4xf32>, tensor<5xf32>) -> tensor<4x4xf32>\n  return %0 : tensor<4x4xf32>',
     "%a: tensor<4x4xf32>, %t: tensor<5xf32>", "tensor<4x4xf32>"),
], ids=["geqrf-integer", "householder-product-too-many-taus"])
def test_qr_calls_they_do_not_take_are_a_compile_error_naming_the_call(body, args, results):
  """(The StableHLO verifier already refuses integer cholesky/triangular_solve operands.)"""
  module = _text_module(body, args, results)
  with pytest.raises(CompileError, match=r"stablehlo\.custom_call\(tensor<4x4x.*float"):
    decompose_householder_qr.run(module)


def test_a_130_cholesky_compiles_in_seconds():
  """The loop is not unrolled: the program does not grow with n."""
  spd = np.eye(130, dtype=np.float32)
  start = time.perf_counter()
  harness.compile_fn(jnp.linalg.cholesky, spd)
  assert time.perf_counter() - start < 30  # ~0.3 s alone; generous for a loaded CI host
