"""Gaps found by running JAX's own tests on trn, closed by passes that rewrite into ops we lower:
TOTALORDER float compares (expand-total-order-compare), scatter-subtract (canonicalize-scatter),
reduce_precision (decompose-reduce-precision), JAX's dce_sink marker; and the float64 message for
JAX and PyTorch users.
Each case runs on the simulator and is compared with the JAX CPU backend."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

import compiler_harness as harness
from hlo_lowering import importer, ir_printer
from hlo_lowering.errors import CompileError
from hlo_lowering.passes import expand_total_order_compare
from jax_trn import compilation

# No denormals: JAX's searchsorted maps x == 0 to +0 first, and the CPU backend flushes
# denormals to zero in that compare while NeuronCore ALUs keep them (docs/numerics.md).
_SPECIAL = np.array([-np.inf, -1e30, -2.5, -1.0, -0.0, 0.0, 1e-30, 1.0, 2.5, 3.0, np.inf, np.nan],
                    np.float32)


def _cpu(f, *args):
  cpu = jax.devices("cpu")[0]
  return jax.jit(f)(*[jax.device_put(a, cpu) for a in args])


def _bits_equal(actual, expected):
  actual, expected = np.asarray(actual), np.asarray(expected)
  assert actual.dtype == expected.dtype and actual.shape == expected.shape
  view = {2: np.uint16, 4: np.uint32}[actual.dtype.itemsize]
  np.testing.assert_array_equal(actual.view(view), expected.view(view))


# -- 1. compare_type TOTALORDER ---------------------------------------------------------------

@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_special_values(side):
  sorted_ = np.sort(_SPECIAL)  # NaN last, as jnp.sort puts it
  queries = np.concatenate([_SPECIAL, np.float32([-np.nan, 0.5, -0.5, -1e-30])])
  harness.check(lambda a, v: jnp.searchsorted(a, v, side=side), sorted_, queries)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.float16])
def test_searchsorted_random(dtype):
  rng = np.random.default_rng(0)
  a = np.sort(rng.normal(size=300).astype(dtype))
  v = rng.normal(size=(5, 67)).astype(dtype)
  harness.check(lambda a, v: jnp.searchsorted(a, v), a, v)


def test_digitize():
  bins = np.float32([-1.0, 0.0, 0.5, 2.0])
  x = np.concatenate([_SPECIAL, np.linspace(-3, 3, 41, dtype=np.float32)])
  harness.check(jnp.digitize, x, bins)
  harness.check(lambda x, b: jnp.digitize(x, b, right=True), x, bins)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.float16])
def test_total_order_compare_every_pair(dtype):
  # -NaN < -Inf < ... < -0 < +0 < ... < Inf < NaN (NaNs by payload), as XLA's CPU backend orders
  # them: JAX's total-order primitives emit compare LT/LE/EQ with compare_type TOTALORDER.
  from jax._src.lax import lax as lax_internal
  with np.errstate(over="ignore", invalid="ignore"):
    values = np.concatenate([np.float32([-np.nan]), _SPECIAL]).astype(dtype)
  values = np.concatenate([values, _special_bits(dtype)[-3:]])  # NaNs with payloads
  a, b = [np.ascontiguousarray(m) for m in np.meshgrid(values, values)]
  harness.check(lambda a, b: (lax_internal.lt_to_p.bind(a, b), lax_internal.le_to_p.bind(a, b),
                              lax_internal.eq_to_p.bind(a, b), lax_internal.lt_to_p.bind(b, a)),
                a, b)


def test_total_order_pass_leaves_no_totalorder_compare():
  a = np.zeros(4, np.float32)
  module = importer.import_program(harness.artifact(lambda a, v: jnp.searchsorted(a, v), a, a),
                                   "mlir")
  from hlo_lowering.passes import inline_calls
  inline_calls.run(module)
  expand_total_order_compare.run(module)
  text = ir_printer.format_module(module)
  assert "TOTALORDER" not in text and "shift_right_arithmetic" in text


# -- 2. scatter with a subtract body ----------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.int32, np.uint8, np.int16])
def test_scatter_subtract_duplicate_indices(dtype):
  rng = np.random.default_rng(1)
  x = (rng.normal(size=(200, 3)) * 50).astype(dtype)
  i = np.array([0, 5, 5, 199, 0, 0, 7, 300, -1], np.int32)  # duplicates and out of range
  v = (rng.normal(size=(9, 3)) * 50).astype(dtype)
  harness.check(lambda x, i, v: x.at[i].subtract(v), x, i, v)


def test_scatter_sub_window():
  x = np.arange(24, dtype=np.float32).reshape(4, 6)
  idx = np.array([[1], [1], [3]], np.int32)
  upd = np.float32(np.arange(18).reshape(3, 6) * 0.25)
  dn = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                   scatter_dims_to_operand_dims=(0,))
  harness.check(lambda x, i, u: lax.scatter_sub(x, i, u, dn), x, idx, upd)
  assert compilation.last_report().summary().get("stablehlo.negate")


# -- 3. reduce_precision ----------------------------------------------------------------------

def _special_bits(dtype):
  info = ml_dtypes.finfo(dtype)
  values = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.0, -1.0, float(info.max),
            -float(info.max), float(info.tiny), float(info.smallest_subnormal), 65504.0, 65520.0,
            6.1e-5, 5.96e-8, 3.0e38, 1e-38, 1.5, 1.25, 1.75, 2.0 ** -14, 2.0 ** -24]
  with np.errstate(over="ignore"):
    arr = np.array(values, np.float32).astype(dtype)
  uint = {2: np.uint16, 4: np.uint32}[np.dtype(dtype).itemsize]
  raw = np.array([arr.view(uint)[4] | uint(1), arr.view(uint)[4] | uint(3),
                  arr.view(uint)[5] | uint(5)], uint)  # NaNs with payloads
  return np.concatenate([arr, raw.view(dtype)])


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.float16])
@pytest.mark.parametrize("exponent_bits, mantissa_bits",
                         [(5, 10), (8, 7), (4, 3), (5, 2), (8, 23), (2, 1), (1, 0), (6, 0),
                          (11, 52), (8, 0), (3, 12)])
def test_reduce_precision_bit_exact(dtype, exponent_bits, mantissa_bits):
  rng = np.random.default_rng(exponent_bits * 100 + mantissa_bits)
  uint = {2: np.uint16, 4: np.uint32}[np.dtype(dtype).itemsize]
  random_bits = rng.integers(0, np.iinfo(uint).max, size=3000, dtype=uint, endpoint=True)
  with np.errstate(over="ignore"):  # large normals overflow f16/bf16 to Inf: wanted
    scaled = (rng.normal(size=500) * 10.0 ** rng.integers(-8, 8, 500)).astype(dtype)
  x = np.concatenate([_special_bits(dtype), random_bits.view(dtype), scaled])
  f = lambda x: lax.reduce_precision(x, exponent_bits=exponent_bits, mantissa_bits=mantissa_bits)
  program = harness.compile_fn(f, x)
  (actual,) = harness.run_program(program, [x])
  expected = np.asarray(_cpu(f, x))
  info = ml_dtypes.finfo(dtype)
  if exponent_bits >= info.nexp and mantissa_bits >= info.nmant and dtype != np.float32:
    # An identity reduce_precision is its operand, returned through the simulator's copy, which
    # quiets f16/bf16 NaN payloads (a DMA conversion issue outside this pass): NaN-ness and sign
    # must agree, every other value bit for bit.
    nan = np.isnan(expected.astype(np.float32))
    np.testing.assert_array_equal(np.isnan(actual.astype(np.float32)), nan)
    np.testing.assert_array_equal(np.signbit(actual.astype(np.float32)),
                                  np.signbit(expected.astype(np.float32)))
    actual, expected = actual[~nan], expected[~nan]
  _bits_equal(actual, expected)


# -- 4. float64 refusal message ---------------------------------------------------------------

def test_float64_message_speaks_to_jax_and_pytorch():
  text = """
func.func @main(%a: tensor<3xf64>) -> tensor<3xf64> {
  %0 = stablehlo.add %a, %a : tensor<3xf64>
  return %0 : tensor<3xf64>
}"""
  with pytest.raises(CompileError) as info:
    compilation.compile_text(text)
  message = str(info.value)
  assert "NeuronCores have no float64 type" in message
  assert "jax_enable_x64 off" in message and ".float()" in message


# -- 5. JAX's dce_sink ------------------------------------------------------------------------

def test_dce_sink_keeps_its_value_and_adds_no_instruction():
  """`lax.dce_sink(v, prevent_mlir_dce=True)` (a custom_call @dce_sink with no results) compiles
  to no instruction of its own; the program around it runs as without it."""
  def f(x):
    y = x * 2
    lax.dce_sink(y, prevent_mlir_dce=True)
    return x + 1

  x = np.arange(6, dtype=np.float32).reshape(2, 3)
  assert "dce_sink" in jax.jit(f).lower(x).as_text()
  np.testing.assert_array_equal(np.asarray(jax.jit(f)(x)), x + 1)
  report = compilation.last_report()
  assert [e.kind for e in report.ops if e.op == "stablehlo.custom_call"] == ["native"]
  assert [e.instructions for e in report.ops if e.op == "stablehlo.custom_call"] == [0]
