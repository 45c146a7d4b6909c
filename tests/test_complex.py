"""complex64 on trn: decompose-complex runs every complex value as a float32 (real, imaginary) pair
(docs/numerics.md, "complex64"). Each op is compared with JAX's CPU backend over odd shapes,
inside jit and eagerly, under grad, and jnp.fft against the CPU's FFT with the DFT's error bound."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cpu_reference import assert_close, assert_matches_cpu, on_device, sum_of_products_bounds
from hlo_lowering.errors import CompileError
from jax_trn import compilation

_RNG = np.random.default_rng(7)


def _complex(*shape, scale=1.0):
  return (scale * (_RNG.standard_normal(shape) + 1j * _RNG.standard_normal(shape))).astype(
      np.complex64)


X, Y = _complex(3, 5), _complex(3, 5)
V = _complex(7)
# Values away from the branch cut (negative reals), where the libm differences stay small.
RIGHT = (np.abs(X.real) + 0.1 + 1j * X.imag).astype(np.complex64)

UNARY = {
    "negate": (jnp.negative, 1), "conj": (jnp.conj, 1), "abs": (jnp.abs, 1),
    "sign": (jnp.sign, 2), "real": (jnp.real, 1), "imag": (jnp.imag, 1),
    "angle": (jnp.angle, 50), "sqrt": (jnp.sqrt, 50), "rsqrt": (jax.lax.rsqrt, 50),
    "exp": (jnp.exp, 50), "expm1": (jnp.expm1, 50), "log": (jnp.log, 50),
    "log1p": (jnp.log1p, 50), "square": (jnp.square, 2), "reciprocal": (jnp.reciprocal, 2),
    "sin": (jnp.sin, 50), "cos": (jnp.cos, 50), "tan": (jnp.tan, 50), "tanh": (jnp.tanh, 50),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("x", [X, pytest.param(V, marks=pytest.mark.slow),
                               pytest.param(RIGHT, marks=pytest.mark.slow)],
                         ids=["3x5", "7", "right-half-plane"])
def test_unary(name, x, trn, cpu):
  f, scale = UNARY[name]
  assert_matches_cpu(f, x, trn=trn, cpu=cpu, scale=scale)


BINARY = {
    "add": (jnp.add, 1), "subtract": (jnp.subtract, 1), "multiply": (jnp.multiply, 2),
    "divide": (jnp.divide, 4), "power": (jnp.power, 100), "equal": (jnp.equal, 1),
    "not_equal": (jnp.not_equal, 1),
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name, trn, cpu):
  f, scale = BINARY[name]
  x, y = (X, Y) if name != "power" else (RIGHT, _complex(3, 5, scale=0.5))
  if name in ("equal", "not_equal"):
    y = np.where(np.arange(15).reshape(3, 5) % 2 == 0, x, Y).astype(np.complex64)
  assert_matches_cpu(f, x, y, trn=trn, cpu=cpu, scale=scale)


def test_special_values_follow_xla(trn, cpu):
  """Division by zero and by infinity, infinite and NaN parts: XLA's corner cases."""
  inf, nan = np.inf, np.nan
  a = np.array([1 + 1j, 0j, complex(inf, 1), complex(1, nan), 2 - 3j, complex(inf, inf), 1j,
                complex(-4, 0), complex(0, -0.0), complex(-inf, 2)], np.complex64)
  b = np.array([0j, 0j, 1 + 2j, 1 + 1j, complex(inf, 0), 2 + 0j, complex(0, inf), 1 + 0j,
                1 + 0j, 3 - 1j], np.complex64)
  for f in (jnp.divide, jnp.multiply):
    assert_matches_cpu(f, a, b, trn=trn, cpu=cpu, scale=4)
  for f in (jnp.abs, jnp.sqrt, jnp.sign, jnp.tanh, jnp.tan, jnp.expm1, jnp.log1p, jnp.exp):
    assert_matches_cpu(f, a, trn=trn, cpu=cpu, scale=50)


def test_construction_and_conversion(trn, cpu):
  re, im = X.real.copy(), X.imag.copy()

  def f(a, b, z):
    built = jax.lax.complex(a, b) * (1 - 2j)
    from_real = a.astype(jnp.complex64) + jnp.int32(3)
    back = jax.lax.convert_element_type(z, jnp.float32)  # the real part, as XLA converts
    iota = jax.lax.iota(jnp.complex64, 4) * (1 + 1j)
    return built, from_real, back, jnp.full((2,), 1.5 - 0.5j, jnp.complex64), iota
  assert_matches_cpu(f, re, im, X, trn=trn, cpu=cpu, scale=2)


def test_data_movement(trn, cpu):
  idx = np.array([2, 0, 2, 1], np.int32)

  def f(x, i):
    return (jnp.broadcast_to(x[:, None, :], (3, 2, 5)), x.reshape(5, 3), x.T, x[1:, ::2],
            jnp.flip(x, 1), jnp.concatenate([x, x * 1j], 0), jnp.pad(x, ((1, 0), (0, 2))),
            jnp.pad(x, 1, constant_values=2 + 1j), x[i], x.at[i].set(1j), x.at[i].add(x[0]),
            jax.lax.dynamic_slice(x, (i[1], i[3]), (2, 3)),
            jax.lax.dynamic_update_slice(x, jnp.ones((2, 2), x.dtype) * 1j, (i[3], i[0])),
            jnp.where(x.real > 0, x, -x))
  assert_matches_cpu(f, X, idx, trn=trn, cpu=cpu)


def test_reductions(trn, cpu):
  # An odd length (7) and a length of 1 exercise the pairwise product tree's carried column.
  for f in (lambda x: jnp.sum(x, axis=1), lambda x: jnp.sum(x), lambda x: jnp.mean(x, axis=0),
            lambda x: jnp.prod(x, axis=1), lambda x: jnp.prod(x[:, :1], axis=1),
            lambda x: jnp.prod(x)):
    assert_matches_cpu(f, X, trn=trn, cpu=cpu, scale=30)
  assert_matches_cpu(jnp.prod, V, trn=trn, cpu=cpu, scale=30)
  assert_matches_cpu(jnp.cumsum, V, trn=trn, cpu=cpu, scale=30)
  for f in (jnp.cumprod, lambda v: jax.lax.cumprod(v, axis=0, reverse=True),
            lambda v: jnp.cumprod(v, axis=1), lambda v: jnp.cumprod(v[:, :1], axis=1)):
    assert_matches_cpu(f, X, trn=trn, cpu=cpu, scale=30)


def test_sort_orders_real_then_imaginary_parts(trn, cpu):
  # NaN parts (also from a constant written as hex NaN), ±0 and ties: JAX's canonical order.
  x = np.array([1 + 2j, 1 - 1j, -3 + 0j, 1 + 2j, complex(np.nan, 0), 0j, complex(-0.0, 1), 2j,
                complex(1, np.nan)], np.complex64)
  for f in (jnp.sort, jnp.argsort, lambda v: jnp.sort(v, descending=True),
            lambda v: jnp.sort(jnp.concatenate([v, jnp.full(1, np.nan + 1j, v.dtype)]))):
    assert_matches_cpu(f, x, trn=trn, cpu=cpu)
  assert_matches_cpu(lambda v: jnp.sort(v, axis=0), X, trn=trn, cpu=cpu)


def _dot_bounds(f, *args, terms):
  """Each part of a complex sum of n products is an fp32 sum of 2n real products, whose
  magnitudes Σ(|ac| + |bd|) ≤ Σ|z||w| (Cauchy–Schwarz): the real bound of 2n terms holds."""
  return sum_of_products_bounds(f, *args, terms=2 * terms)


@pytest.mark.parametrize("lhs_real", [False, True], ids=["complex-complex", "real-complex"])
def test_dot(lhs_real, trn, cpu):
  a, b = _complex(5, 7), _complex(7, 3)
  if lhs_real:
    a = a.real.copy()
  f = jnp.matmul
  assert_matches_cpu(f, a, b, trn=trn, cpu=cpu, bounds=_dot_bounds(f, a, b, terms=7))
  batched = lambda p, q: jnp.einsum("bij,bjk->bik", p, q)  # noqa: E731
  p, q = _complex(2, 3, 9), _complex(2, 9, 4)
  assert_matches_cpu(batched, p, q, trn=trn, cpu=cpu,
                     bounds=_dot_bounds(batched, p, q, terms=9))


def test_convolution(trn, cpu):
  x, k = _complex(1, 2, 6, 5), _complex(3, 2, 3, 2)

  def f(x, k):
    return jax.lax.conv_general_dilated(x, k, (1, 1), "SAME")
  assert_matches_cpu(f, x, k, trn=trn, cpu=cpu, bounds=_dot_bounds(f, x, k, terms=2 * 3 * 2))


def test_control_flow_carries_complex(trn, cpu):
  def mandelbrot(c):
    def body(state):
      z, n = state
      inside = jnp.abs(z) <= 2
      return jnp.where(inside, z * z + c, z), n + inside.astype(jnp.int32)
    return jax.lax.while_loop(lambda s: jnp.all(s[1] < 12) & jnp.any(jnp.abs(s[0]) < 2), body,
                              (jnp.zeros_like(c), jnp.zeros(c.shape, jnp.int32)))[1]

  def branches(i, x):
    return jax.lax.switch(i, [lambda v: v * 1j, lambda v: jnp.conj(v), lambda v: v + 1], x)

  def scan(x):
    return jax.lax.scan(lambda carry, v: (carry * v, carry + v), jnp.complex64(1), x)

  grid = (np.linspace(-2, 0.5, 5)[None, :] + 1j * np.linspace(-1, 1, 3)[:, None]).astype(
      np.complex64)
  assert_matches_cpu(mandelbrot, grid, trn=trn, cpu=cpu)
  for i in range(3):
    assert_matches_cpu(branches, np.int32(i), X, trn=trn, cpu=cpu)
  assert_matches_cpu(scan, V, trn=trn, cpu=cpu, scale=30)
  assert_matches_cpu(jax.jit(lambda x: jax.lax.fori_loop(0, 3, lambda _, v: v * (1 + 1j), x)),
                     V, trn=trn, cpu=cpu, scale=4)


def test_grad_of_real_functions_of_complex_intermediates(trn, cpu):
  theta, weights = X.real.copy(), Y

  def phase_energy(t, w):
    return jnp.sum(jnp.real(jnp.exp(1j * t) * w)) + jnp.sum(jnp.abs(w * t) ** 2)

  def spectral_power(x):
    return jnp.sum(jnp.abs(jnp.fft.fft(x)) ** 2)

  assert_matches_cpu(jax.grad(phase_energy), theta, weights, trn=trn, cpu=cpu, scale=50)
  assert_matches_cpu(jax.grad(phase_energy, argnums=1), theta, weights, trn=trn, cpu=cpu,
                     scale=50)
  x = X.real.copy()
  # The gradient (2N·x by Parseval) is a DFT of x, doubled, then the adjoint DFT. The first is
  # within e = 2γ_2N·Σ|x| per part (the row's sum); the adjoint sums N unit-modulus multiples of
  # it (≤ 2√2·N·e) and rounds its own sum of 2N products of magnitude ≤ 2·Σ|x| (≤ 2N·e): under
  # 5N·e on each backend, so 10N·e between them.
  n = x.shape[-1]
  gamma = 2 * n * 2.0 ** -24 / (1 - 2 * n * 2.0 ** -24)
  e = 2 * gamma * np.abs(x).astype(np.float64).sum(axis=-1, keepdims=True)
  assert_matches_cpu(jax.grad(spectral_power), x, trn=trn, cpu=cpu,
                     bounds=[np.broadcast_to(10 * n * e, x.shape)])


def test_eager_ops_and_identity(trn, cpu):
  x, y = jax.device_put(X, trn), jax.device_put(Y, trn)
  assert x.dtype == jnp.complex64
  assert_close(x * y + 1j, on_device(lambda a, b: a * b + 1j, cpu, X, Y), scale=2)
  assert_close(jnp.abs(x), np.abs(X), scale=2)
  np.testing.assert_array_equal(np.asarray(x), X)  # device_put round trip: the bytes
  np.testing.assert_array_equal(np.asarray(jax.jit(lambda v: v)(x)), X)
  empty = jax.device_put(np.zeros((0, 3), np.complex64), trn)
  assert jax.jit(lambda v: v * 2j)(empty).shape == (0, 3)


# --- FFT ---------------------------------------------------------------------------------------

def _dft_bounds(x: np.ndarray, axes: tuple[int, ...], inverse: bool) -> list[np.ndarray]:
  """Each output of an N-point DFT (N = the transformed axes' product) is, per part, an fp32 sum
  of ≤ 2N products of x with unit-modulus twiddles (one DFT matmul per axis, each rounding its
  sums), so both parts lie within 2·γ_2N·Σ|x| per axis of the exact value (/N for an inverse);
  the CPU's FFT is more accurate, and a further u·|result| covers the rounding of the result."""
  n = int(np.prod([x.shape[a] for a in axes]))
  gamma = 2 * n * 2.0 ** -24 / (1 - 2 * n * 2.0 ** -24)
  total = np.abs(x).astype(np.float64).sum(axis=axes, keepdims=True)
  return [2 * len(axes) * gamma * total / (n if inverse else 1) + 1e-30]


FFTS = {
    "fft": (jnp.fft.fft, (-1,), False), "ifft": (jnp.fft.ifft, (-1,), True),
    "fft2": (jnp.fft.fft2, (-2, -1), False), "ifftn": (jnp.fft.ifftn, (-3, -2, -1), True),
}


# Every transform over each shape with at least as many dims as its axes.
_FFT_CASES = [pytest.param(name, shape, id=f"{name}-{'x'.join(map(str, shape))}",
                           marks=[pytest.mark.slow] if len(shape) == 3 else [])
              for name in sorted(FFTS) for shape in [(3, 5), (2, 3, 12), (8,)]
              if len(FFTS[name][1]) <= len(shape)]


@pytest.mark.parametrize("name,shape", _FFT_CASES)
def test_fft(name, shape, trn, cpu):
  f, axes, inverse = FFTS[name]
  x = _complex(*shape)
  assert_matches_cpu(f, x, trn=trn, cpu=cpu, bounds=_dft_bounds(x, axes, inverse))


@pytest.mark.parametrize("shape", [(3, 5), (4, 8), (2, 3, 6)], ids=["3x5", "4x8", "2x3x6"])
def test_real_ffts_and_round_trips(shape, trn, cpu):
  x = _RNG.standard_normal(shape).astype(np.float32)
  n = shape[-1]
  assert_matches_cpu(jnp.fft.rfft, x, trn=trn, cpu=cpu, bounds=_dft_bounds(x, (-1,), False))
  assert_matches_cpu(jnp.fft.rfft2, x, trn=trn, cpu=cpu,
                     bounds=_dft_bounds(x, (-2, -1), False))
  spectrum = np.asarray(on_device(jnp.fft.rfft, cpu, x))
  # The half spectrum stands for n points: its bound counts the mirrored terms twice.
  assert_matches_cpu(lambda s: jnp.fft.irfft(s, n), spectrum, trn=trn, cpu=cpu,
                     bounds=[2 * b for b in _dft_bounds(spectrum, (-1,), True)])
  round_trip = on_device(lambda v: jnp.fft.irfft(jnp.fft.rfft(v), n), trn, x)
  np.testing.assert_allclose(np.asarray(round_trip), x, atol=2e-5 * np.abs(x).max() * n)
  z = _complex(*shape)
  np.testing.assert_allclose(np.asarray(on_device(lambda v: jnp.fft.ifft(jnp.fft.fft(v)), trn, z)),
                             z, atol=2e-5 * np.abs(z).max() * n)
  irfftn = lambda s: jnp.fft.irfftn(s, shape[-2:])  # noqa: E731
  half = np.asarray(on_device(jnp.fft.rfft2, cpu, x))
  assert_matches_cpu(irfftn, half, trn=trn, cpu=cpu,
                     bounds=[2 * b for b in _dft_bounds(half, (-2, -1), True)])


def test_fft_longer_than_the_twiddle_limit_is_a_clear_error(trn):
  x = jax.device_put(np.zeros(2048, np.complex64), trn)
  with pytest.raises(Exception, match=r"stablehlo.fft.*an FFT axis of length 2048 is longer "
                     r"than trn's 1024"):
    jnp.fft.fft(x)


# --- refusals ----------------------------------------------------------------------------------

def test_complex128_is_refused_with_advice():
  text = ("func.func @main(%a: tensor<3xcomplex<f64>>) -> tensor<3xcomplex<f64>> {\n"
          "  return %a : tensor<3xcomplex<f64>>\n}")
  with pytest.raises(CompileError, match=r"complex<f64>: NeuronCores have no float64, so no "
                     r"complex128: use complex64"):
    compilation.compile_text(text)


def test_an_op_without_a_complex_rule_is_named(trn):
  x = jax.device_put(X, trn)
  with pytest.raises(Exception, match=r"stablehlo.reduce\(tensor<3x5xc64>.*complex64 "
                     r"stablehlo.reduce is not supported on trn: a body computing"):
    jnp.max(x)  # a lexicographic max: a reduce body of compares and selects
  np.testing.assert_array_equal(np.asarray(jax.jit(lambda v: v + 0)(x)), X)  # still usable
