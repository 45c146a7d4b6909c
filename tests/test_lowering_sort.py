"""sort, argsort, multi-operand sort and argmax/argmin (gp_sort / gp_arg_reduce) against the
JAX CPU backend: NaN, -0.0, ties, integers, every axis."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import compiler_harness as harness
from hlo_lowering.program import reader
from jax_trn import compilation


def _special(shape, seed=0):
  """Floats with NaNs, ±0.0, ±inf and repeated values."""
  rng = np.random.default_rng(seed)
  x = rng.integers(-3, 4, shape).astype(np.float32) * 0.5
  flat = x.reshape(-1)
  picks = rng.choice(flat.size, size=min(flat.size, 12), replace=False)
  for k, value in zip(picks, [np.nan, -0.0, 0.0, np.inf, -np.inf, np.nan, -0.0, -np.nan] * 2):
    flat[k] = value
  return x


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_argmax_argmin_each_axis(axis):
  x = _special((5, 6, 130))
  harness.check(lambda x: (jnp.argmax(x, axis=axis), jnp.argmin(x, axis=axis)), x)
  assert compilation.last_report().summary()["stablehlo.reduce"] == {"gpsimd": 2}


def test_argmax_ties_ints_and_flat():
  x = np.array([[3, 7, 7, 1], [2, 2, 2, 2], [-5, -9, -9, 0]], np.int32)
  harness.check(lambda x: (jnp.argmax(x, 1), jnp.argmin(x, 1), jnp.argmax(x), jnp.argmin(x, 0)),
                x)
  nan_first = np.array([[1.0, np.nan, 5.0, np.nan], [-0.0, 0.0, -0.0, 0.0]], np.float32)
  harness.check(lambda x: (jnp.argmax(x, 1), jnp.argmin(x, 1)), nan_first)
  harness.check(lambda x: jnp.argmax(x, 1), _special((4, 9)).astype(jnp.bfloat16))


def test_single_operand_reduce_is_unaffected():
  x = _special((6, 7))
  harness.check(lambda x: jnp.max(x, axis=1), x)  # single-operand reduce is unaffected


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_sort_and_argsort_floats(axis):
  x = _special((9, 140))
  harness.check(lambda x: (jnp.sort(x, axis=axis), jnp.argsort(x, axis=axis)), x)
  harness.check(lambda x: jnp.sort(x, axis=axis, descending=True), x)
  harness.check(lambda x: jnp.argsort(x, axis=axis, descending=True), x)


def test_sort_signed_zero_and_nan_bits():
  x = np.array([0.0, -0.0, np.nan, -np.nan, 1.0, -np.inf, -0.0, 0.0], np.float32)
  program = harness.check(lambda x: (jnp.sort(x), jnp.argsort(x)), x)
  outputs = harness.run_program(program, [x])
  expected = jnp.sort(jax.device_put(x, jax.devices("cpu")[0]))
  assert np.array_equal(outputs[0].view(np.uint32), np.asarray(expected).view(np.uint32))


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int8])
def test_sort_ints(dtype):
  x = np.random.default_rng(3).integers(0, 120, (4, 33)).astype(dtype)
  harness.check(lambda x: (jnp.sort(x, axis=1), jnp.argsort(x, axis=0)), x)


def test_sort_bool_and_bf16():
  harness.check(jnp.sort, np.array([True, False, True, False]))
  harness.check(lambda x: jnp.sort(x, axis=0), _special((7, 3)).astype(jnp.bfloat16))


def test_multi_operand_sort():
  keys = np.array([[3, 1, 3, 1, 2], [0, 0, 0, 0, 0]], np.int32)
  values = _special((2, 5))
  payload = np.arange(10, dtype=np.float32).reshape(2, 5)
  harness.check(lambda k, v, p: jax.lax.sort((k, v, p), dimension=1, num_keys=2), keys, values,
                payload)
  harness.check(lambda k, v, p: jax.lax.sort((v, k, p), dimension=1, num_keys=1), keys, values,
                payload)
  harness.check(lambda k, p: jax.lax.sort_key_val(k, p, dimension=0), keys, payload)


def test_sort_zero_size_and_scalar_rows():
  harness.check(lambda x: jnp.sort(x, axis=1), np.zeros((3, 0), np.float32))
  harness.check(lambda x: jnp.argsort(x, axis=0), np.ones((1, 4), np.float32))


def test_variadic_reduce_with_another_body_runs_as_a_region_program():
  def crossed_reduce(x):
    return jax.lax.reduce((x, x), (0.0, 1.0), lambda a, b: (a[0] + b[1], a[1] * b[0]), (0,))

  harness.check(crossed_reduce, np.linspace(0.5, 2.0, 12, dtype=np.float32).reshape(4, 3))


# torch_xla's argmax/argmin and torch.max/min(x, dim): XLA's select body (the HLO torch_xla 2.9
# sends, converted to StableHLO), which JAX never emits.
_TORCH_ARG_REDUCE = """
func.func @main(%x: tensor<{shape}x{t}>) -> (tensor<{kept}x{t}>, tensor<{kept}xi32>) {{
  %iota = stablehlo.iota dim = {axis} : tensor<{shape}xi32>
  %init = stablehlo.constant dense<{init}> : tensor<{t}>
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = "stablehlo.reduce"(%x, %iota, %init, %zero) ({{
  ^bb0(%a: tensor<{t}>, %ai: tensor<i32>, %b: tensor<{t}>, %bi: tensor<i32>):
    %keep = stablehlo.compare {direction}, %a, %b : (tensor<{t}>, tensor<{t}>) -> tensor<i1>
    %value = stablehlo.select %keep, %a, %b : tensor<i1>, tensor<{t}>
    %equal = stablehlo.compare EQ, %a, %b : (tensor<{t}>, tensor<{t}>) -> tensor<i1>
    %smaller = stablehlo.minimum %ai, %bi : tensor<i32>
    %chosen = stablehlo.select %keep, %ai, %bi : tensor<i1>, tensor<i32>
    %index = stablehlo.select %equal, %smaller, %chosen : tensor<i1>, tensor<i32>
    stablehlo.return %value, %index : tensor<{t}>, tensor<i32>
  }}) {{dimensions = array<i64: {axis}>}} : (tensor<{shape}x{t}>, tensor<{shape}xi32>, tensor<{t}>,
      tensor<i32>) -> (tensor<{kept}x{t}>, tensor<{kept}xi32>)
  return %r#0, %r#1 : tensor<{kept}x{t}>, tensor<{kept}xi32>
}}"""


def _torch_arg_reduce(x: np.ndarray, axis: int, direction: str):
  """(program text, NumPy reference) of torch_xla's reduce of (x, iota) over `axis`."""
  t = "f32" if x.dtype == np.float32 else "i32"
  init = {"f32": {"GE": "0xFF800000", "LE": "0x7F800000"},
          "i32": {"GE": "-2147483648", "LE": "2147483647"}}[t][direction]
  kept = [n for d, n in enumerate(x.shape) if d != axis]
  text = _TORCH_ARG_REDUCE.format(shape="x".join(map(str, x.shape)), t=t, init=init, axis=axis,
                                  direction=direction, kept="x".join(map(str, kept)))
  # The body folded in element order, the accumulator first (docs/program-format.md).
  rows = np.moveaxis(x, axis, -1).reshape(-1, x.shape[axis])
  values = np.empty(len(rows), x.dtype)
  indices = np.empty(len(rows), np.int32)
  for r, row in enumerate(rows):
    acc, acc_i = x.dtype.type(init if t == "i32" else ("-inf" if direction == "GE" else "inf")), 0
    for i, v in enumerate(row):
      keep = acc >= v if direction == "GE" else acc <= v
      acc_i = min(acc_i, i) if acc == v else (acc_i if keep else i)
      acc = acc if keep else v
    values[r], indices[r] = acc, acc_i
  return text, (values.reshape(kept), indices.reshape(kept))


@pytest.mark.parametrize("direction", ["GE", "LE"])
@pytest.mark.parametrize("axis", [0, 1])
def test_torch_xla_arg_reduce_body(axis, direction):
  harness.native()
  x = _special((6, 9), seed=axis)
  x[2] = [np.nan, 1.0, 3.0, np.nan, 2.0, 2.0, -0.0, 0.0, np.nan]  # NaN last: it survives
  x[3] = [0.0, -0.0, 1.0, np.nan, -1.0, 0.0, -0.0, -1.0, 1.0]  # one NaN, then ties after it
  x[4] = [-0.0, 0.0, -0.0, 0.0, -0.0, 0.0, -0.0, 0.0, -0.0]
  x[5] = np.nan
  cases = [x, x.copy().view(np.uint32).astype(np.int32) % 7 - 3]  # and ints with many ties
  for case in cases:
    text, expected = _torch_arg_reduce(case, axis, direction)
    program = harness.compile_code(text.encode())
    assert compilation.last_report().summary()["stablehlo.reduce"] == {"gpsimd": 1}
    values, indices = harness.run_program(program, [case])
    np.testing.assert_array_equal(indices, expected[1])
    # Bitwise, so that -0.0 and +0.0 (ties keep the accumulator) are told apart.
    np.testing.assert_array_equal(values.view(np.int32), expected[0].view(np.int32))


def test_torch_xla_arg_reduce_body_semantics_by_hand():
  """The NumPy reference itself on rows whose answers are known."""
  x = np.array([[1.0, 3.0, 3.0, np.nan, 2.0, 2.0], [np.nan, 1.0, 5.0, 5.0, 0.0, np.nan],
                [-0.0, 0.0, -1.0, 0.0, -0.0, -1.0]], np.float32)
  _, (values, indices) = _torch_arg_reduce(x, 1, "GE")
  assert indices.tolist() == [4, 5, 0] and values[:1].tolist() == [2.0]
  assert np.isnan(values[1]) and np.signbit(values[2])
  _, (values, indices) = _torch_arg_reduce(x, 1, "LE")
  assert indices.tolist() == [4, 5, 2] and values[0] == 2.0 and values[2] == -1.0


@pytest.mark.parametrize("change", ["maximum", "GT"])
def test_torch_xla_body_with_another_comparison_runs_as_a_region_program(change):
  x = np.array([[1.0, 3.0, 3.0, 2.0, 3.0, 0.5], [0.0, 0.0, -1.0, 0.0, 4.0, 4.0]], np.float32)
  text, _ = _torch_arg_reduce(x, 1, "GE")
  text = text.replace("stablehlo.minimum %ai", "stablehlo.maximum %ai") if change == "maximum" \
      else text.replace("compare GE, %a", "compare GT, %a")
  program = harness.compile_code(text.encode())
  assert "gp_region_reduce" in reader.disassemble(program)
  values, indices = harness.run_program(program, [x])
  want_values, want_indices = [], []
  for row in x:  # the changed body folded by hand, the accumulator first
    acc, acc_i = np.float32(-np.inf), 0
    for i, v in enumerate(row):
      keep = acc >= v if change == "maximum" else acc > v
      tie = max(acc_i, i) if change == "maximum" else min(acc_i, i)
      acc_i = tie if acc == v else (acc_i if keep else i)
      acc = acc if keep else v
    want_values.append(acc)
    want_indices.append(acc_i)
  np.testing.assert_array_equal(values, np.array(want_values, np.float32))
  np.testing.assert_array_equal(indices, np.array(want_indices, np.int32))