"""Run one JAX function on trn and on the CPU backend and compare, with tolerances that follow
from the documented numerics (docs/numerics.md): integers and bools exact; floats computed in
fp32 on the engines and rounded once to the output dtype, so elementwise results agree to a few
ulps of the output dtype, transcendentals to the libm differences, and sums to the reordering of
fp32 accumulation."""

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


def on_device(f, device, *args):
  """Runs jit(f) with its inputs committed to `device` (the computation follows the data)."""
  placed = [jax.device_put(a, device) for a in args]
  return jax.jit(f)(*placed)


def assert_close(actual, expected, *, scale: float = 1.0, err_msg: str = "") -> None:
  """Shape and dtype first, then exact equality (integers, bools) or allclose (floats)."""
  actual_leaves = jax.tree_util.tree_leaves(actual)
  expected_leaves = jax.tree_util.tree_leaves(expected)
  assert len(actual_leaves) == len(expected_leaves), err_msg
  for a, e in zip(actual_leaves, expected_leaves):
    a, e = np.asarray(a), np.asarray(e)
    assert a.shape == e.shape, f"{err_msg}: shape {a.shape} != {e.shape}"
    assert a.dtype == e.dtype, f"{err_msg}: dtype {a.dtype} != {e.dtype}"
    if a.dtype.kind in "biu":
      np.testing.assert_array_equal(a, e, err_msg=err_msg)
    else:
      rtol, atol = tolerance(a.dtype, scale)
      np.testing.assert_allclose(a.astype(np.float32), e.astype(np.float32), rtol=rtol,
                                 atol=atol, equal_nan=True, err_msg=err_msg)


def assert_matches_cpu(f, *args, trn, cpu, scale: float = 1.0):
  """f on trn equals f on the CPU backend within the output dtypes' tolerances."""
  expected = on_device(f, cpu, *args)
  actual = on_device(f, trn, *args)
  assert_close(actual, expected, scale=scale, err_msg=getattr(f, "__name__", "f"))
  return actual
