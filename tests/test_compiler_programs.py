"""Whole programs JAX emits (softmax, layer norm, jax.random, an MLP) and the compiler's errors."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import compiler_harness as harness
from hlo_lowering.errors import CompileError
from jax_trn import compilation


def _x(shape=(8, 130)):
  return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def test_softmax_and_layer_norm():
  harness.check(jax.nn.softmax, _x(), scale=20)
  harness.check(lambda x: (x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True)
                                                                      + 1e-5), _x(), scale=20)


def test_random_is_bit_exact():
  key = jax.random.key_data(jax.random.PRNGKey(42))
  harness.check(lambda k: jax.random.bits(jax.random.wrap_key_data(k), (5, 7)), key)
  harness.check(lambda k: jax.random.uniform(jax.random.wrap_key_data(k), (300,)), key)
  harness.check(lambda k: jax.random.normal(jax.random.wrap_key_data(k), (4, 5)), key, scale=50)


def test_mlp_forward_and_sgd_step():
  rng = np.random.default_rng(1)
  w1, w2 = rng.standard_normal((16, 32), np.float32), rng.standard_normal((32, 10), np.float32)
  x, y = rng.standard_normal((8, 16), np.float32), rng.standard_normal((8, 10), np.float32)

  def loss(w1, w2, x, y):
    return jnp.mean((jax.nn.relu(x @ w1) @ w2 - y) ** 2)

  def step(w1, w2, x, y):
    l, (g1, g2) = jax.value_and_grad(loss, argnums=(0, 1))(w1, w2, x, y)
    return l, w1 - 0.1 * g1, w2 - 0.1 * g2

  harness.check(step, w1, w2, x, y, scale=50)


def test_unsupported_op_is_reported_with_source_line():
  def vendor_kernel(a):  # a custom call to a kernel the simulator does not have: no rule
    return jax.ffi.ffi_call("no_such_kernel", jax.ShapeDtypeStruct(a.shape, a.dtype))(a)

  with pytest.raises(CompileError) as info:
    harness.compile_fn(vendor_kernel, np.eye(4, dtype=np.float32))
  message = str(info.value)
  assert "stablehlo.custom_call" in message and "docs/adding-an-op.md" in message
  assert re.search(r"test_compiler_programs\.py:\d+", message)


def test_missing_rule_names_op_shape_and_line():
  with pytest.raises(CompileError) as info:
    harness.compile_fn(
        lambda a, b: jax.ffi.ffi_call("no_such_kernel", jax.ShapeDtypeStruct(b.shape, b.dtype))(
            a, b) + 1,
        np.eye(8, dtype=np.float32), np.ones((8, 130), np.float32))
  message = str(info.value)
  assert "stablehlo.custom_call" in message and "f32[8, 130]" in message
  assert re.search(r"test_compiler_programs\.py:\d+", message)
  assert info.value.code == "UNIMPLEMENTED"


def test_float64_is_rejected():
  text = """func.func @main(%a: tensor<4xf64>) -> tensor<4xf64> {
    %0 = stablehlo.add %a, %a : tensor<4xf64>
    return %0 : tensor<4xf64>
  }"""
  harness.native()
  with pytest.raises(CompileError, match="no float64"):
    compilation.compile_text(text)


def test_options_both_replicated_and_partitioned_are_rejected():
  with pytest.raises(CompileError, match="replicated and partitioned multi-device") as info:
    harness.compile_code(harness.artifact(jnp.sin, _x()), num_replicas=2, num_partitions=4)
  assert info.value.code == "UNIMPLEMENTED"


def test_hlo_proto_input_and_report():
  harness.native()
  f = lambda x: jnp.tanh(x) + jnp.transpose(x)
  proto = jax.jit(f).lower(_x((5, 5))).compiler_ir("hlo").as_serialized_hlo_module_proto()
  before = compilation.compile_count()
  harness.compile_code(proto, "hlo")
  assert compilation.compile_count() == before + 1
  summary = compilation.last_report().summary()
  assert summary["stablehlo.tanh"] == {"native": 1}
  assert summary["stablehlo.transpose"] == {"gpsimd": 1}


def test_invalid_program_is_invalid_argument():
  with pytest.raises(CompileError) as info:
    harness.compile_code(b"not mlir at all")
  assert info.value.code == "INVALID_ARGUMENT"
