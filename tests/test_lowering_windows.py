"""stablehlo.reduce_window and stablehlo.select_and_scatter (hlo_lowering/lowering/gpsimd/
windows.py: gp_reduce_window, gp_select_and_scatter) against the JAX CPU backend: max/avg pooling
2x2 stride 2 and 3x3 stride 1 SAME on NHWC and NCHW with odd sizes, the gradient of max pooling,
cumsum/cumprod/cummax/cummin over each axis and reversed, lax.reduce_window with padding, strides,
base and window dilation, float32/bfloat16/int32; and the loader's checks of the new opcodes."""

import struct

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

import compiler_harness as harness
from hlo_lowering.errors import CompileError
from hlo_lowering.program import Alu, DType, HbmAP, ProgramBuilder, Scalar
from jax_trn import compilation

DTYPES = [np.float32, ml_dtypes.bfloat16, np.int32]


def _data(shape, dtype, seed=0):
  rng = np.random.default_rng(seed)
  if np.dtype(dtype).kind in "iu":
    return rng.integers(-50, 50, shape).astype(dtype)
  return rng.standard_normal(shape).astype(dtype)


def _lowest(dtype):
  return -np.inf if np.dtype(dtype).kind == "f" or dtype == ml_dtypes.bfloat16 else \
      int(np.iinfo(dtype).min)


def _max_pool(window, strides, padding, layout):
  spatial = (1, window, window, 1) if layout == "NHWC" else (1, 1, window, window)
  step = (1, strides, strides, 1) if layout == "NHWC" else (1, 1, strides, strides)

  def pool(x):
    return lax.reduce_window(x, _lowest(x.dtype), lax.max, spatial, step, padding)
  return pool


def _avg_pool(window, strides, padding, layout):
  spatial = (1, window, window, 1) if layout == "NHWC" else (1, 1, window, window)
  step = (1, strides, strides, 1) if layout == "NHWC" else (1, 1, strides, strides)

  def pool(x):
    total = lax.reduce_window(x, 0, lax.add, spatial, step, padding)
    return total / (window * window) if jnp.issubdtype(x.dtype, jnp.floating) else total
  return pool


def _gpsimd(op_name):
  assert compilation.last_report().summary()[op_name] == {"gpsimd": 1}


POOLS = [(2, 2, "VALID"), (3, 1, "SAME"), (3, 2, "SAME")]


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("window,strides,padding", POOLS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_max_and_avg_pool(layout, window, strides, padding, dtype):
  shape = (2, 7, 9, 3) if layout == "NHWC" else (2, 3, 7, 9)
  x = _data(shape, dtype)
  harness.check(_max_pool(window, strides, padding, layout), x)
  _gpsimd("stablehlo.reduce_window")
  harness.check(_avg_pool(window, strides, padding, layout), x)


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("window,strides,padding", POOLS)
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=lambda d: np.dtype(d).name)
def test_max_pool_gradient(layout, window, strides, padding, dtype):
  shape = (2, 7, 9, 3) if layout == "NHWC" else (2, 3, 7, 9)
  x = _data(shape, dtype, seed=1)
  pool = _max_pool(window, strides, padding, layout)
  harness.check(jax.grad(lambda x: (pool(x) * jnp.arange(1, pool(x).size + 1).reshape(
      pool(x).shape).astype(x.dtype)).sum()), x)
  _gpsimd("stablehlo.select_and_scatter")


def test_max_pool_gradient_ties_take_the_first():
  # Equal values in a window: the first (row-major) wins, as XLA's select GE keeps it.
  x = np.zeros((1, 6, 6, 1), np.float32)
  x[0, ::2, ::2, 0] = 1.0
  x[0, 1::2, 1::2, 0] = 1.0
  harness.check(jax.grad(lambda x: _max_pool(2, 2, "VALID", "NHWC")(x).sum()), x)
  harness.check(jax.grad(lambda x: _max_pool(3, 1, "SAME", "NHWC")(x).sum()), x)


CUMULATIVE = {"cumsum": lax.cumsum, "cumprod": lax.cumprod, "cummax": lax.cummax,
              "cummin": lax.cummin}


@pytest.mark.parametrize("name", sorted(CUMULATIVE))
@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_cumulative(name, axis, reverse, dtype):
  x = _data((5, 11, 7), dtype, seed=axis)
  if name == "cumprod":
    x = (x / 40 + 1).astype(dtype) if np.dtype(dtype).kind == "f" or dtype == ml_dtypes.bfloat16 \
        else np.clip(x, -2, 2).astype(dtype)
  harness.check(lambda x: CUMULATIVE[name](x, axis=axis, reverse=reverse), x)
  _gpsimd("stablehlo.reduce_window")


def test_jnp_cumulative_functions():
  x = _data((6, 9), np.float32)
  harness.check(lambda x: jnp.cumsum(x, axis=1), x)
  harness.check(lambda x: jnp.cumsum(x), x)  # flattened
  harness.check(lambda x: jnp.cumprod(x / 4 + 1, axis=0), x)
  harness.check(lambda x: jnp.cumsum(x > 0, axis=0), x)  # bool input, int32 sums
  i = _data((6, 9), np.int32)
  harness.check(lambda x: jnp.cumsum(x, axis=0), i)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("reducer", ["add", "max", "min", "mul"])
def test_reduce_window_padding_strides_dilations(dtype, reducer):
  x = _data((9, 10), dtype, seed=3)
  if reducer == "mul":
    x = np.clip(x, -2, 2).astype(dtype) if np.dtype(dtype).kind == "i" else \
        (x / 8 + 1).astype(dtype)
  fn, init = {"add": (lax.add, 0), "max": (lax.max, _lowest(dtype)),
              "min": (lax.min, -_lowest(dtype) if np.dtype(dtype).kind != "i" else
                      np.iinfo(dtype).max), "mul": (lax.mul, 1)}[reducer]
  configs = [
      dict(window_dimensions=(3, 2), window_strides=(2, 3), padding=((1, 2), (0, 1))),
      dict(window_dimensions=(2, 3), window_strides=(1, 1), padding=((0, 0), (2, 2)),
           base_dilation=(2, 1)),
      dict(window_dimensions=(2, 2), window_strides=(1, 2), padding=((1, 1), (1, 0)),
           window_dilation=(3, 2)),
      dict(window_dimensions=(3, 3), window_strides=(2, 1), padding=((2, 1), (1, 3)),
           base_dilation=(2, 3), window_dilation=(1, 2)),
  ]
  for config in configs:
    harness.check(lambda x: lax.reduce_window(x, jnp.array(init, x.dtype), fn, **config), x)
    _gpsimd("stablehlo.reduce_window")


def test_reduce_window_runtime_and_non_identity_init():
  x = _data((4, 7), np.float32)
  harness.check(lambda x: lax.reduce_window(x, 5.0, lax.add, (2, 3), (1, 2), ((1, 0), (0, 1))), x)
  harness.check(lambda x, y: lax.reduce_window(x, y, lax.max, (2, 2), (1, 1), "SAME"), x,
                np.float32(0.25))


def test_reduce_window_bitwise_and_odd_shapes():
  x = _data((3, 130, 5), np.int32)
  harness.check(lambda x: lax.reduce_window(x, jnp.int32(0), lax.bitwise_or, (1, 4, 2),
                                            (1, 3, 1), "SAME"), x)
  harness.check(lambda x: lax.reduce_window(x > 0, True, lax.bitwise_and, (2, 2, 1),
                                            (1, 1, 1), "VALID"), x)
  # a window larger than the input: one output element per dim from the padding alone
  harness.check(lambda x: lax.reduce_window(x, jnp.int32(0), lax.add, (5, 140, 7),
                                            (1, 1, 1), ((1, 1), (5, 5), (1, 1))), x)


def test_variadic_reduce_window_runs_as_a_region_program():
  x = _data((4, 6), np.float32)
  f = lambda x, i: lax.reduce_window((x, i), (-jnp.inf, 0),
                                     lambda a, b: (lax.max(a[0], b[0]), lax.max(a[1], b[1])),
                                     (2, 2), (1, 1), "VALID")
  harness.check(f, x, _data((4, 6), np.int32))
  _gpsimd("stablehlo.reduce_window")


# --- the program format: the loader's checks of gp_reduce_window / gp_select_and_scatter ------

def _window_program(window, out_shape=(3,), base_shape=(6,), op=Alu.ADD, dtype=DType.F32):
  b = ProgramBuilder("trn2")
  src = b.tensor("parameter", dtype, base_shape, index=0, name="x")
  dst = b.tensor("output", dtype, out_shape, index=0, name="y")
  b.gp_reduce_window(op, HbmAP.dense(dst, out_shape), HbmAP.dense(src, base_shape),
                     Scalar(dtype, 0), window)
  return harness.finish(b)


def test_gp_reduce_window_runs_as_documented():
  program = _window_program([(2, 2, 1, 1, 0, 1)], out_shape=(3,), base_shape=(6,))
  x = np.arange(6, dtype=np.float32)
  (y,) = harness.run_program(program, [x])
  np.testing.assert_array_equal(y, [1, 5, 9])


def _patch_window_values(program: bytes, old: list, new: list) -> bytes:
  before = struct.pack("<I", len(old)) + struct.pack(f"<{len(old)}q", *old)
  after = struct.pack("<I", len(new)) + struct.pack(f"<{len(new)}q", *new)
  assert program.count(before) == 1
  return program.replace(before, after)


@pytest.mark.parametrize("new,message", [
    ([2, 2, 1, 1, 0], "6 per dim"),
    ([0, 2, 1, 1, 0, 1], "sizes, strides and dilations must be >= 1"),
    ([2, 0, 1, 1, 0, 1], "sizes, strides and dilations must be >= 1"),
    ([2, 2, 1, 1, -1, 1], "paddings >= 0"),
    ([2, 1, 1, 1, 0, 1], "window positions"),
    ([2, 2, 1, 1, 0, 1, 2, 2, 1, 1, 0, 1], "window has 2 dims"),
    ([2, 2, 1, 1 << 62, 0, 1], "sizes, strides and dilations"),
])
def test_malformed_window_is_rejected(new, message):
  program = _window_program([(2, 2, 1, 1, 0, 1)])
  bad = _patch_window_values(program, [2, 2, 1, 1, 0, 1], new)
  with pytest.raises(ValueError, match=message):
    harness.run_program(bad, [np.zeros(6, np.float32)])


def test_select_and_scatter_rejects_bad_selector_and_dilation():
  b = ProgramBuilder("trn2")
  x = b.tensor("parameter", DType.F32, (4,), index=0, name="x")
  s = b.tensor("parameter", DType.F32, (2,), index=1, name="s")
  y = b.tensor("output", DType.F32, (4,), index=0, name="y")
  b.gp_select_and_scatter(Alu.GE, Alu.ADD, HbmAP.dense(y, (4,)), HbmAP.dense(x, (4,)),
                          HbmAP.dense(s, (2,)), Scalar(DType.F32, 0), [(2, 2, 1, 1, 0, 0)])
  program = harness.finish(b)
  (out,) = harness.run_program(program, [np.array([1, 3, 2, 2], np.float32),
                                         np.array([10, 20], np.float32)])
  np.testing.assert_array_equal(out, [0, 10, 20, 0])
  assert program.count(bytes([int(Alu.GE), int(Alu.ADD)])) >= 1
  bad = program.replace(bytes([int(Alu.GE), int(Alu.ADD)]), bytes([int(Alu.EQ), int(Alu.ADD)]), 1)
  with pytest.raises(ValueError, match="not a window selector"):
    harness.run_program(bad, [np.zeros(4, np.float32), np.zeros(2, np.float32)])
  bad = _patch_window_values(program, [2, 2, 1, 1, 0, 0], [2, 2, 2, 1, 0, 0])
  with pytest.raises(ValueError, match="no dilation"):
    harness.run_program(bad, [np.zeros(4, np.float32), np.zeros(2, np.float32)])


_REDUCE_WINDOW_PADDING = """
func.func public @main(%x: tensor<8xf32>) -> tensor<7xf32> {
  %c = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = "stablehlo.reduce_window"(%x, %c) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {window_dimensions = array<i64: 2>, padding = PADDING} : (tensor<8xf32>, tensor<f32>) -> tensor<7xf32> loc("r.py":3:1)
  return %0 : tensor<7xf32>
}
"""


def test_reduce_window_empty_padding_of_a_rank_1_operand_is_a_compile_error():
  """StableHLO's verifier lets an empty [0, 2] padding through (it checks only non-empty ones)."""
  harness.native()
  with pytest.raises(CompileError, match=r"reduce_window: attribute padding has shape \[0, 2\], "
                     r"expected \[1, 2\] for a rank-1 operand, at r.py:3"):
    compilation.compile_text(_REDUCE_WINDOW_PADDING.replace("PADDING", "dense<0> : tensor<0x2xi64>"))
