"""Strict mode (TRN_STRICT=1, jax_trn.configure(strict=True)): a program with an op on the GpSimd
general-purpose path fails to compile, naming every such op and its source line; programs the
engines run natively are unaffected; a cached program is held to the same rule."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import compiler_harness as harness
from hlo_lowering.errors import CompileError
from jax_trn import compilation, config

X = np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32)


def _uses_gpsimd(x):
  return jnp.sort(x, axis=0) + 1.0  # sort runs on GpSimd's general path


def _native(x):
  return jnp.tanh(x) * 2.0


def test_gpsimd_op_is_a_compile_error_naming_it(monkeypatch):
  monkeypatch.setenv("TRN_STRICT", "1")
  with pytest.raises(CompileError) as error:
    harness.compile_fn(_uses_gpsimd, X)
  message = str(error.value)
  assert "strict mode" in message and "stablehlo.sort" in message
  assert "test_strict_mode.py:" in message  # the user's source line
  assert error.value.code == "FAILED_PRECONDITION"
  harness.check(_native, X)  # native programs compile as usual


def test_off_by_default_and_with_zero(monkeypatch):
  monkeypatch.delenv("TRN_STRICT", raising=False)
  harness.check(_uses_gpsimd, X)
  monkeypatch.setenv("TRN_STRICT", "0")
  harness.check(_uses_gpsimd, X)


def test_a_cached_program_is_held_to_strict_mode(monkeypatch, tmp_path):
  monkeypatch.setenv("TRN_CACHE_DIR", str(tmp_path))
  monkeypatch.delenv("TRN_STRICT", raising=False)
  harness.compile_fn(_uses_gpsimd, X)
  hits = compilation.cache_stats()["hits"]
  monkeypatch.setenv("TRN_STRICT", "1")
  with pytest.raises(CompileError, match="strict mode"):
    harness.compile_fn(_uses_gpsimd, X)
  assert compilation.cache_stats()["hits"] == hits + 1


def test_through_jit_on_trn(monkeypatch, trn):
  monkeypatch.setenv("TRN_STRICT", "1")
  with pytest.raises(Exception, match="(?s)strict mode.*stablehlo.sort"):
    jax.jit(lambda x: jnp.sort(x, axis=0) - 1.0)(jax.device_put(X, trn))
  np.testing.assert_allclose(jax.jit(_native)(jax.device_put(X, trn)), np.tanh(X) * 2.0,
                             rtol=1e-5, atol=1e-6)


def test_bad_value_is_a_clear_error(monkeypatch):
  monkeypatch.setenv("TRN_STRICT", "maybe")
  with pytest.raises(ValueError, match="TRN_STRICT='maybe' is not a boolean"):
    config.current()
