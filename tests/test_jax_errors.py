"""Bad input and unsupported programs fail as Python exceptions that say what and where, and the
backend stays usable afterwards."""

import re

import jax
import numpy as np
import pytest

from hlo_lowering.errors import CompileError
from jax_trn import compilation


def _vendor_kernel(x):
  return jax.ffi.ffi_call("no_such_kernel", jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def test_unsupported_op_names_the_op_and_the_user_line(trn):
  # A custom call to a kernel the simulator does not have: no lowering rule (docs/coverage.md).
  x = jax.device_put(np.eye(8, dtype=np.float32), trn)
  with pytest.raises(Exception) as info:
    jax.jit(_vendor_kernel)(x)
  message = str(info.value)
  assert "stablehlo.custom_call" in message
  line = _vendor_kernel.__code__.co_firstlineno + 1
  assert re.search(rf"test_jax_errors\.py:{line}\b", message), message
  # The failure left the backend usable.
  np.testing.assert_array_equal(np.asarray(jax.jit(lambda v: v + 1)(x)), np.eye(8) + 1)


def test_float64_programs_are_refused(trn):
  with jax.enable_x64(True):
    with pytest.raises(Exception, match="float64"):
      jax.jit(lambda v: v * 2)(jax.device_put(np.ones(3, np.float64), trn))


def test_a_buffer_of_another_client_is_refused_not_dereferenced(trn, cpu):
  x = jax.device_put(np.ones(4, np.float32), trn)
  executable = jax.jit(lambda a, b: a + b).lower(x, x).compile()._executable.xla_executable
  foreign = jax.device_put(np.ones(4, np.float32), cpu)
  with pytest.raises(Exception, match="INVALID_ARGUMENT: argument 0 is not a buffer of this trn "
                     r"client .*jax.device_put"):
    executable.execute_sharded([foreign, x])
  np.testing.assert_array_equal(jax.jit(lambda a: a * 2)(x), np.full(4, 2, np.float32))


def test_the_element_type_refusal_lists_only_types_neuroncores_hold():
  text = ("func.func @main(%a: tensor<3xf8E4M3FNUZ>) -> tensor<3xf8E4M3FNUZ> {\n"
          "  return %a : tensor<3xf8E4M3FNUZ>\n}")
  with pytest.raises(CompileError, match=r"element type f8E4M3FNUZ is not supported on "
                     r"NeuronCores \(supported: i1, .*f32, bf16, .*complex<f32>, i4, "
                     r"ui4\)") as refusal:
    compilation.compile_text(text)
  assert "f64" not in str(refusal.value)
