"""Elementwise ops that run on ScalarE (lowering/elementwise_engines.py) compute the bits they do
on VectorE: x · c, x + c, x − c, c − x, x · x with immediates and per-row operands, x + 0 (whose
−0 becomes +0 on VectorE, so ScalarE adds a zero bias tile), in fp32 and bf16, and an AdamW step;
so do fp32 pairs fused into one scalar_tensor_tensor (either operand order of either op);
and they match the JAX CPU backend within the documented tolerances (XLA CPU folds x + 0 to x
and contracts x · s + s into an FMA, so it is not the bit-exact reference here)."""

from __future__ import annotations

import jax
import ml_dtypes
import numpy as np
import optax
import pytest

import compiler_harness as harness
from hlo_lowering.lowering import elementwise_engines
from hlo_lowering.program import read_program


def _special_data(dtype, n=1000, seed=3):
  info = ml_dtypes.finfo(dtype)
  x = np.random.default_rng(seed).standard_normal(n).astype(np.float32) * 3
  special = np.array([0.0, -0.0, info.tiny, -info.tiny, info.max, -info.max, np.inf, -np.inf,
                      np.nan, 1.0, -1.0], np.float32)
  return np.concatenate([x, special]).astype(dtype).reshape(-1, 1011 // 3)


def _assert_same_bits(monkeypatch, f, *args):
  """Compiles f as is and with every op on VectorE, one instruction each (the code generation
  before ScalarE shared the work and scalar_tensor_tensor fused pairs); both must compute the
  same bits, and match the JAX CPU backend within the
  documented tolerances. Returns the shared program's opcodes."""
  monkeypatch.setenv("TRN_CACHE_DIR", "")  # compile both, not one from the cache
  shared = harness.check(f, *args)
  with monkeypatch.context() as m:
    m.setattr(elementwise_engines, "_scalar_eligible", lambda t: False)
    m.setattr(elementwise_engines, "_fusions", lambda forms, shared: {})
    vector_only = harness.compile_fn(f, *args)
  assert shared != vector_only
  for a, e in zip(harness.run_program(shared, list(args)),
                  harness.run_program(vector_only, list(args))):
    a, e = np.asarray(a), np.asarray(e)
    bits = np.dtype(f"u{a.dtype.itemsize}")
    assert np.array_equal(a.view(bits), e.view(bits))
  return [inst.opcode.name for stream in read_program(shared).streams.values()
          for inst in stream]


@pytest.mark.parametrize("name,f", [
    ("add_zero", lambda x: x + np.float32(0.0)),
    ("sub_negative_zero", lambda x: x - np.float32(-0.0)),
    ("zero_minus", lambda x: np.float32(0.0) - x),
    ("scale", lambda x: x * np.float32(3.0)),
    ("shift", lambda x: x - np.float32(1.5)),
    ("reverse_shift", lambda x: np.float32(2.5) - x),
    ("square", lambda x: x * x),
])
def test_lone_fp32_op_on_scalar_engine_keeps_the_bits(monkeypatch, name, f):
  opcodes = _assert_same_bits(monkeypatch, f, _special_data(np.float32))
  assert "ACTIVATION" in opcodes, name
  assert ("IOTA" in opcodes) == (name in ("add_zero", "sub_negative_zero", "zero_minus")), name


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_per_row_operands_on_scalar_engine_keep_the_bits(monkeypatch, dtype):
  x = _special_data(dtype)
  s = np.abs(np.random.default_rng(5).standard_normal(x.shape[0])).astype(dtype) + 1
  s[:2] = [0.0, -0.0]

  def f(x, s):
    row = s[:, None]
    return x * row, x + row, row - x, x - row, (x * row + row) * x
  opcodes = _assert_same_bits(monkeypatch, f, x, s)
  assert "ACTIVATION" in opcodes or "ACTIVATION_REDUCE" in opcodes


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_adamw_step_shared_between_engines_keeps_the_bits(monkeypatch, dtype):
  tx = optax.adamw(1e-3, weight_decay=1e-2)
  rng = np.random.default_rng(0)
  params = {"w": rng.standard_normal((300, 700)).astype(dtype), "b": _special_data(dtype)}
  grads = {k: rng.standard_normal(v.shape).astype(dtype) for k, v in params.items()}
  with jax.default_device(jax.devices("cpu")[0]):
    state = tx.init(params)
  state = jax.tree_util.tree_map(
      lambda a: np.abs(rng.standard_normal(a.shape)).astype(a.dtype) if a.dtype.kind == "f"
      else np.asarray(a) + 3, state)

  def step(g, s, p):
    u, s = tx.update(g, s, p)
    return optax.apply_updates(p, u), s
  leaves = jax.tree_util.tree_leaves((grads, state, params))
  treedef = jax.tree_util.tree_structure((grads, state, params))
  opcodes = _assert_same_bits(monkeypatch,
                              lambda *a: step(*jax.tree_util.tree_unflatten(treedef, a)), *leaves)
  assert "ACTIVATION" in opcodes
  assert ("SCALAR_TENSOR_TENSOR" in opcodes) == (dtype == np.float32)  # fp32 intermediates only


def test_scalar_tensor_tensor_keeps_the_bits_of_its_two_ops(monkeypatch):
  x, y = _special_data(np.float32, seed=1), _special_data(np.float32, seed=2)[::-1].copy()
  s = np.abs(np.random.default_rng(4).standard_normal(x.shape[0])).astype(np.float32) + 0.5

  def f(x, y, s):
    row = s[:, None]
    return ((x * np.float32(0.9)) + y, y - x / row, (np.float32(2.0) - x) * y,
            y / (x + np.float32(1e-8)), (row - x) - y)
  opcodes = _assert_same_bits(monkeypatch, f, x, y, s)
  assert "SCALAR_TENSOR_TENSOR" in opcodes  # every pair fused: no instruction of its own left
  assert not {"TENSOR_SCALAR", "TENSOR_TENSOR", "ACTIVATION"} & set(opcodes)
