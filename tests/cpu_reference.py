"""Run one JAX function on trn and on the CPU backend and compare, with tolerances that follow
from the documented numerics (docs/numerics.md): integers and bools exact; floats computed in
fp32 on the engines and rounded once to the output dtype, so elementwise results agree to a few
ulps of the output dtype, transcendentals to the libm differences, and sums of products (dots,
convolutions) to the standard error bound of an fp32 sum in any order."""

from __future__ import annotations

import jax
import ml_dtypes
import numpy as np

# (rtol, atol) per output dtype for arithmetic of one or a few ops.
_TOLERANCE = {
    np.dtype(np.float32): (2e-6, 1e-6),
    np.dtype(np.float16): (2e-3, 1e-3),
    np.dtype(ml_dtypes.bfloat16): (1.6e-2, 1e-2),
    np.dtype(ml_dtypes.float8_e4m3fn): (1.3e-1, 1e-1),
    np.dtype(ml_dtypes.float8_e5m2): (2.6e-1, 2e-1),
}


def tolerance(dtype, scale: float = 1.0) -> tuple[float, float]:
  rtol, atol = _TOLERANCE[np.dtype(dtype)]
  return rtol * scale, atol * scale


_FP32_UNIT_ROUNDOFF = 2.0 ** -24


def sum_of_products_bounds(f, *args, terms: int) -> list[np.ndarray]:
  """Per-element bounds on |trn − cpu| for f's float results when every result element is a sum
  of at most `terms` products (dot_general, convolution), one array per result leaf.

  Any fp32 evaluation of such a sum, in any order, lies within γ_n·Σ|a·b| of the exact value
  (γ_n = n·u / (1 − n·u), u = 2⁻²⁴: Higham, "Accuracy and Stability of Numerical Algorithms",
  §3.1), so the two backends differ by at most 2·γ_n·Σ|a·b|; both then round once to the result
  dtype (unit roundoff u_out). Σ|a·b| is f itself on |a| and |b| (on the CPU: a sum of
  non-negative terms, accurate to γ_n, which the bound absorbs). The bound depends on the data,
  not on the result's magnitude, so cancellation in a sum cannot make a correct result fail.
  """
  cpu = jax.devices("cpu")[0]
  gamma = terms * _FP32_UNIT_ROUNDOFF / (1 - terms * _FP32_UNIT_ROUNDOFF)
  magnitudes = [jax.device_put(np.abs(np.asarray(a)), cpu) for a in args]
  exact = jax.jit(f)(*[jax.device_put(a, cpu) for a in args])
  absolute = jax.jit(lambda *a: jax.tree_util.tree_map(
      lambda r: r.astype(np.float32), f(*a)))(*magnitudes)
  bounds = []
  for result, sums in zip(jax.tree_util.tree_leaves(exact), jax.tree_util.tree_leaves(absolute)):
    result = np.asarray(result)
    if result.dtype.kind == "c":  # each part of a complex64 result (float32 pairs)
      result = np.abs(result).astype(np.float32)
    u_out = 0.0 if result.dtype.kind in "biu" else float(ml_dtypes.finfo(result.dtype).eps) / 2
    sums = np.asarray(sums, np.float64) / (1 - gamma)
    bounds.append(2 * gamma * sums * (1 + u_out)
                  + 2 * u_out / (1 - u_out) * np.abs(result.astype(np.float64)))
  return bounds


def on_device(f, device, *args):
  """Runs jit(f) with its inputs committed to `device` (the computation follows the data)."""
  placed = [jax.device_put(a, device) for a in args]
  return jax.jit(f)(*placed)


def assert_close(actual, expected, *, scale: float = 1.0, err_msg: str = "",
                 bounds: list[np.ndarray] | None = None) -> None:
  """Shape and dtype first, then exact equality (integers, bools) or allclose (floats); with
  `bounds` (one array per leaf, e.g. `sum_of_products_bounds`), |actual − expected| ≤ bound."""
  actual_leaves = jax.tree_util.tree_leaves(actual)
  expected_leaves = jax.tree_util.tree_leaves(expected)
  assert len(actual_leaves) == len(expected_leaves), err_msg
  for i, (a, e) in enumerate(zip(actual_leaves, expected_leaves)):
    a, e = np.asarray(a), np.asarray(e)
    assert a.shape == e.shape, f"{err_msg}: shape {a.shape} != {e.shape}"
    assert a.dtype == e.dtype, f"{err_msg}: dtype {a.dtype} != {e.dtype}"
    if a.dtype.kind in "biu":
      np.testing.assert_array_equal(a, e, err_msg=err_msg)
    elif a.dtype.kind == "c":
      _assert_complex_close(a, e, scale, err_msg, None if bounds is None else bounds[i])
    elif bounds is not None:
      error = np.abs(a.astype(np.float64) - e.astype(np.float64))
      over = ~(error <= bounds[i]) & ~(np.isnan(a) & np.isnan(e))
      assert not over.any(), (
          f"{err_msg}: {int(over.sum())} of {a.size} elements exceed the sum-of-products bound, "
          f"worst {float(error[over].max()):.3g} (allowed {float(bounds[i][over].min()):.3g})")
    else:
      rtol, atol = tolerance(a.dtype, scale)
      np.testing.assert_allclose(a.astype(np.float32), e.astype(np.float32), rtol=rtol,
                                 atol=atol, equal_nan=True, err_msg=err_msg)


def _assert_complex_close(a: np.ndarray, e: np.ndarray, scale: float, err_msg: str,
                          bound: np.ndarray | None) -> None:
  """complex64 (float32 pairs, docs/numerics.md): each part within `bound` (a sum-of-products
  bound, which holds for each part), else |a − e| ≤ atol + rtol·|e| with float32's tolerances:
  relative to the complex magnitude, so a part that cancels to ~0 is not held to its own size.
  NaN must appear in the same parts on both sides; infinities must be equal."""
  for part in ("real", "imag"):
    pa, pe = getattr(a, part), getattr(e, part)
    assert np.array_equal(np.isnan(pa), np.isnan(pe)), f"{err_msg}: NaNs differ in the {part} part"
  finite = ~(np.isnan(a) | np.isnan(e))
  a64, e64 = a.astype(np.complex128)[finite], e.astype(np.complex128)[finite]
  same = a64 == e64
  with np.errstate(invalid="ignore"):  # inf − inf where a part is infinite on both sides
    error = np.abs(a64 - e64)
    if bound is not None:
      allowed = np.broadcast_to(bound, a.shape)[finite]
      over = ~same & ~((np.abs(a64.real - e64.real) <= allowed)
                       & (np.abs(a64.imag - e64.imag) <= allowed))
    else:
      rtol, atol = tolerance(np.float32, scale)
      allowed = atol + rtol * np.abs(e64)
      over = ~same & ~(error <= allowed)
  assert not over.any(), (
      f"{err_msg}: {int(over.sum())} of {a.size} complex elements differ, worst |trn − cpu| "
      f"{float(np.nanmax(error[over])):.3g} (allowed {float(allowed[over].min()):.3g}); "
      f"first trn {a64[over][0]}, cpu {e64[over][0]}")


def assert_matches_cpu(f, *args, trn, cpu, scale: float = 1.0,
                       bounds: list[np.ndarray] | None = None):
  """f on trn equals f on the CPU backend within the output dtypes' tolerances (or `bounds`)."""
  expected = on_device(f, cpu, *args)
  actual = on_device(f, trn, *args)
  assert_close(actual, expected, scale=scale, err_msg=getattr(f, "__name__", "f"), bounds=bounds)
  return actual
