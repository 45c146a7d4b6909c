"""stablehlo.convolution against the JAX CPU backend: the native TensorE rule
(hlo_lowering/lowering/convolution.py: one matmul per kernel tap into one PSUM bank) for float
1-D/2-D convolutions in any layout, stride, padding and rhs dilation, and gp_convolution
(lowering/gpsimd/convolution.py) for the rest: lhs dilation (input gradients), feature groups
(depthwise), batch groups (their weight gradients), integers, 3-D. Plus a Flax model and the
modeled device time of a ResNet-sized 3x3 conv against TensorE's fp32 peak."""

import math

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import compiler_harness as harness
from cpu_reference import sum_of_products_bounds
from jax_trn import compilation

conv = jax.lax.conv_general_dilated


def _data(shape, dtype, seed):
  rng = np.random.default_rng(seed)
  if np.dtype(dtype).kind in "iu":
    return rng.integers(-5, 5, shape).astype(dtype)
  return rng.standard_normal(shape).astype(dtype)


def _check(f, *args, contraction: int, kind: str, count: int = 1):
  """Compares with CPU within the error bound of a `contraction`-term fp32 sum (integers exactly)
  and checks which rule lowered every convolution."""
  harness.check(f, *args, bounds=sum_of_products_bounds(f, *args, terms=contraction))
  assert compilation.last_report().summary()["stablehlo.convolution"] == {kind: count}


# (name, lhs shape, rhs shape, kwargs of conv_general_dilated); NCHW/OIHW unless dimension_numbers.
NATIVE = [
    ("3x3 same", (2, 3, 7, 7), (4, 3, 3, 3), dict(window_strides=(1, 1), padding="SAME")),
    ("valid odd", (1, 5, 33, 9), (6, 5, 3, 2), dict(window_strides=(1, 1), padding="VALID")),
    ("stride 2", (2, 3, 33, 33), (8, 3, 3, 3), dict(window_strides=(2, 2), padding="SAME")),
    ("explicit and negative padding", (2, 3, 7, 7), (4, 3, 3, 3),
     dict(window_strides=(2, 1), padding=((2, 0), (-1, 3)))),
    ("rhs dilation (atrous)", (1, 4, 17, 17), (5, 4, 3, 3),
     dict(window_strides=(1, 1), padding="SAME", rhs_dilation=(2, 3))),
    ("130 channels", (2, 130, 7, 7), (130, 130, 3, 3), dict(window_strides=(1, 1), padding="SAME")),
    ("NHWC/HWIO", (2, 9, 33, 130), (3, 3, 130, 5),
     dict(window_strides=(2, 2), padding="VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))),
    ("NHWC/HWIO same", (1, 7, 7, 3), (3, 3, 3, 16),
     dict(window_strides=(1, 1), padding="SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))),
    ("1-D", (2, 3, 33), (5, 3, 4), dict(window_strides=(1,), padding="SAME")),
    ("1-D NWC stride 2", (2, 33, 3), (4, 3, 6),
     dict(window_strides=(2,), padding=((1, 2),), dimension_numbers=("NWC", "WIO", "NWC"))),
    ("wide rows", (1, 2, 3, 600), (3, 2, 1, 3), dict(window_strides=(1, 1), padding="SAME")),
]


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("name,lhs,rhs,kwargs", NATIVE, ids=[c[0] for c in NATIVE])
def test_native_convolution(name, lhs, rhs, kwargs, dtype):
  dn = kwargs.get("dimension_numbers")
  kernel_in = rhs[dn[1].index("I")] if dn else rhs[1]
  taps = math.prod(rhs) // kernel_in // (rhs[dn[1].index("O")] if dn else rhs[0])
  f = lambda x, k: conv(x, k, **kwargs)
  _check(f, _data(lhs, dtype, 1), _data(rhs, dtype, 2), contraction=kernel_in * taps,
         kind="native")


GPSIMD = [
    ("depthwise", (2, 6, 9, 9), (12, 1, 3, 3),
     dict(window_strides=(1, 1), padding="SAME", feature_group_count=6)),
    ("grouped", (1, 8, 7, 7), (6, 4, 3, 3),
     dict(window_strides=(2, 2), padding="VALID", feature_group_count=2)),
    ("lhs dilation (transposed)", (2, 3, 5, 5), (4, 3, 3, 3),
     dict(window_strides=(1, 1), padding=((2, 2), (1, 2)), lhs_dilation=(2, 2))),
    ("batch groups", (4, 3, 6, 6), (6, 3, 3, 3),
     dict(window_strides=(1, 1), padding="VALID", batch_group_count=2)),
    ("3-D", (1, 2, 5, 6, 7), (3, 2, 2, 3, 2), dict(window_strides=(1, 2, 1), padding="SAME")),
]


@pytest.mark.parametrize("name,lhs,rhs,kwargs", GPSIMD, ids=[c[0] for c in GPSIMD])
def test_general_forms_run_on_gpsimd(name, lhs, rhs, kwargs):
  f = lambda x, k: conv(x, k, **kwargs)
  _check(f, _data(lhs, np.float32, 1), _data(rhs, np.float32, 2),
         contraction=math.prod(rhs[1:]), kind="gpsimd")


@pytest.mark.parametrize("dtype", [np.int32, np.int8])
def test_integer_convolution_is_exact_on_gpsimd(dtype):
  f = lambda x, k: conv(x, k, (1, 2), "SAME", feature_group_count=2,
                        preferred_element_type=jnp.int32)
  _check(f, _data((2, 4, 9, 8), dtype, 1), _data((6, 2, 3, 3), dtype, 2), contraction=1,
         kind="gpsimd")


def _loss(x, k, **kwargs):
  return jnp.sum(jnp.tanh(conv(x, k, **kwargs)) ** 2)


@pytest.mark.parametrize("kwargs", [
    dict(window_strides=(1, 1), padding="SAME"),
    dict(window_strides=(2, 2), padding="SAME"),
    dict(window_strides=(1, 1), padding="SAME", feature_group_count=3),
], ids=["stride 1", "stride 2", "depthwise"])
def test_gradients_of_a_conv_loss(kwargs):
  """jax.grad w.r.t. input and weights: the transposed forms (lhs dilation for strided inputs,
  feature-swapped weight gradients, batch_group_count for the grouped weight gradient)."""
  x, k = _data((2, 3, 8, 8), np.float32, 1), _data((6, 3 // kwargs.get("feature_group_count", 1),
                                                       3, 3), np.float32, 2)
  grad = jax.grad(lambda x, k: _loss(x, k, **kwargs), argnums=(0, 1))
  harness.check(grad, x, k, scale=40)
  assert sum(compilation.last_report().summary()["stablehlo.convolution"].values()) == 3


def test_flax_conv_model_forward_and_grad():
  nn = pytest.importorskip("flax.linen")

  class Model(nn.Module):
    @nn.compact
    def __call__(self, x):
      x = nn.relu(nn.Conv(8, (3, 3))(x))
      x = nn.relu(nn.Conv(8, (3, 3), strides=(2, 2))(x))
      return nn.Dense(3)(x.reshape(x.shape[0], -1))

  model = Model()
  x = _data((2, 12, 12, 3), np.float32, 1)
  params = model.init(jax.random.PRNGKey(0), x)
  harness.check(lambda p, x: model.apply(p, x), params, x, scale=20)
  assert compilation.last_report().summary()["stablehlo.convolution"] == {"native": 2}
  loss = lambda p, x: jnp.mean(model.apply(p, x) ** 2)
  harness.check(jax.grad(loss), params, x, scale=40)


def test_3x3_conv_64_channels_device_time_against_tensor_engine_peak():
  """8 x 64 x 32 x 32, 3x3, 64 -> 64, f32: modeled device time vs one core's fp32 TensorE peak
  (2·128·128·clock/4 FLOP/ns). With 64 input and 64 output channels each matmul uses a quarter
  of the 128x128 array, so 25 % is this shape's ceiling."""
  x, k = _data((8, 64, 32, 32), np.float32, 1), _data((64, 64, 3, 3), np.float32, 2)
  f = lambda x, k: conv(x, k, (1, 1), "SAME")
  program = harness.compile_fn(f, x, k)
  assert compilation.last_report().summary()["stablehlo.convolution"] == {"native": 1}
  outputs, profile = harness.native().run_program(program, [x, k])
  cpu = jax.devices("cpu")[0]
  expected = np.asarray(jax.jit(f)(jax.device_put(x, cpu), jax.device_put(k, cpu)))
  np.testing.assert_allclose(outputs[0], expected, rtol=1e-4, atol=1e-3)
  flops = 2 * 8 * 64 * 32 * 32 * 64 * 9
  assert profile["matmul_flops"] == flops
  spec = harness.native().target_spec("trn2")
  peak = 2 * 128 * 128 * spec["tensor_clock_ghz"] / 4
  utilization = flops / peak / profile["device_time_ns"]
  print(f"3x3 conv 64->64 on 8x32x32 f32: {profile['device_time_ns'] / 1e3:.1f} us, "
        f"{utilization:.1%} of TensorE fp32 peak")
  assert utilization > 0.15
