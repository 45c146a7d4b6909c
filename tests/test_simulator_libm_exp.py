"""fp32 exp and logistic (libm_exp.cc's vector kernel) give the host libm's bits: every lane is
compared with libm's own expf, called through ctypes, on inputs chosen to reach each of the
kernel's cases: ordinary lanes, lanes whose exact value lies near the midpoint between two
floats (which the kernel hands to libm), subnormal and zero results, overflow, ±inf and NaN, on
rows long and odd enough for the vector loop and its scalar tail. The vector widths are checked
against each other in test_simulator_host_independence.py (its elementwise chain has exp)."""

import ctypes
import ctypes.util

import numpy as np
import pytest

from hlo_lowering.program import Alu, DType, HbmAP, Memory, ProgramBuilder, TileAP
from compiler_harness import finish

_native = pytest.importorskip("jax_trn._native")
_libm = ctypes.CDLL(ctypes.util.find_library("m"))
_libm.expf.restype = ctypes.c_float
_libm.expf.argtypes = [ctypes.c_float]


def _libm_exp(x):
  return np.array([_libm.expf(float(v)) for v in x.reshape(-1)], np.float32).reshape(x.shape)


def _activation(func, x):
  p, free = x.shape
  b = ProgramBuilder()
  t = b.tensor("parameter", DType.F32, x.shape, index=0)
  y = b.tensor("output", DType.F32, x.shape, index=0)
  src = TileAP.dense(Memory.SBUF, DType.F32, 0, p, 0, (free,))
  dst = TileAP.dense(Memory.SBUF, DType.F32, 0, p, 8192, (free,))
  b.dma_copy(0, src, HbmAP.dense(t, x.shape))
  b.activation(func, dst, src)
  b.dma_copy(1, HbmAP.dense(y, x.shape), dst)
  outputs, _ = _native.run_program(finish(b), [x])
  return outputs[0]


def _near_midpoints(rng, count):
  """fp32 inputs whose e^x (in float64) lies within 2^-9 ulp of a midpoint between floats."""
  x = rng.uniform(-87, 88, 4_000_000).astype(np.float32)
  y = np.exp(x.astype(np.float64))
  below = y.astype(np.float32)
  below = np.where(below.astype(np.float64) > y, np.nextafter(below, np.float32(0)), below)
  ulp = np.nextafter(below, np.float32(np.inf)).astype(np.float64) - below
  offset = (y - below) / ulp
  return x[np.abs(offset - 0.5) < 2.0**-9][:count]


def _inputs():
  rng = np.random.default_rng(11)
  special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 88.72283, 88.72284, 89.0,
                      -87.33654, -87.33655, -103.97207, -103.97208, -104.0, -1e9, 1e9,
                      1e-45, -1e-45, 2.0**-25, -(2.0**-25), 2.0**-24, -(2.0**-24), 1.0, -1.0],
                     np.float32)
  bits = rng.integers(0, 2**32, 40_000, dtype=np.uint64).astype(np.uint32)
  x = np.concatenate([
      special,
      _near_midpoints(rng, 4_000),
      rng.uniform(-104.5, -86.5, 20_000).astype(np.float32),  # subnormal results and zero
      rng.uniform(-20, 20, 60_000).astype(np.float32),
      bits.view(np.float32),  # every exponent, NaN payloads too
  ])
  rows, cols = 128, 1031
  padded = np.resize(x, rows * cols).reshape(rows, cols)
  padded.reshape(-1)[: x.size] = x
  return padded


def _same_bits(a, b):
  np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


def test_exp_has_libm_bits():
  x = _inputs()
  _same_bits(_activation(Alu.EXP, x), _libm_exp(x))


def test_logistic_has_the_bits_of_one_over_one_plus_libm_exp():
  x = _inputs()
  with np.errstate(over="ignore"):
    expected = np.float32(1) / (np.float32(1) + _libm_exp(-x))
  _same_bits(_activation(Alu.LOGISTIC, x), expected)
