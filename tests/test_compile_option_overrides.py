"""XLA compile options (`jit(..., compiler_options=...)`) are checked by XLA's own parser:
an unknown name or a mistyped value is XLA's INVALID_ARGUMENT, a valid one runs the same program
(JAX's api_test / pmap_test compiler_options cases)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hlo_lowering import compiler
from hlo_lowering.errors import CompileError


def _f(x):
  return jnp.sqrt(x ** 2) + 1.0


def _x():
  return jax.device_put(np.float32(-3.0), jax.devices("trn")[0])


def test_valid_options_compile_and_change_nothing():
  plain = jax.jit(_f)(_x())
  for options in ({"xla_embed_ir_in_executable": True}, {"xla_embed_ir_in_executable": False},
                  {"exec_time_optimization_effort": 0.0}):
    assert jax.jit(_f, compiler_options=options)(_x()) == plain == 4.0


def test_an_unknown_option_is_xlas_error():
  with pytest.raises(jax.errors.JaxRuntimeError, match="No such compile option: 'invalid_key'"):
    jax.jit(_f, compiler_options={"invalid_key": "invalid_value"})(_x())
  with pytest.raises(jax.errors.JaxRuntimeError, match="No such"):
    jax.jit(_f, compiler_options={"exec_time_compilation_effort": 0.0})(_x())


def test_a_mistyped_value_is_xlas_error():
  lowered = jax.jit(_f).lower(_x())
  with pytest.raises(jax.errors.JaxRuntimeError, match="is not a valid bool value."):
    lowered.compile(compiler_options={"xla_embed_ir_in_executable": "invalid_value"})


def test_the_compiler_checks_overrides_before_anything_else():
  with pytest.raises(CompileError, match="No such compile option: 'nope'") as info:
    compiler.check_options(compiler.CompileOptions(option_overrides=(("nope", 1),)))
  assert info.value.code == "INVALID_ARGUMENT"
  checked = compiler.check_options(
      compiler.CompileOptions(option_overrides=(("xla_embed_ir_in_executable", True),)))
  assert (checked.num_replicas, checked.num_partitions) == (1, 1)
