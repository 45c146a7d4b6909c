"""stablehlo.fft (FFT, IFFT, RFFT, IRFFT) as DFT matmuls over float32 pairs, for
decompose-complex.

Each transformed axis of length N is one dense DFT: the operand's axis is contracted with an
N×N (RFFT: N×(N/2+1); IRFFT: (N/2+1)×N) matrix of twiddle factors exp(∓2πi·nk/N), computed in
float64 from the exact integer nk mod N and rounded once to float32. A complex × complex axis
is 4 real dot_generals (re = xr·Wr − xi·Wi, im = xr·Wi + xi·Wr), which TensorE runs in fp32.
Multi-dimensional transforms apply the axes one after another (RFFT: the last axis first, real
to complex; IRFFT: the other axes first, the last axis, complex to real, at the end). IRFFT
takes the Hermitian half spectrum as numpy does: the imaginary parts of the DC and (even N)
Nyquist terms are ignored. The error of one output is an fp32 sum of N products, bounded by
γ_N·Σ|x| (an FFT's is O(log N·u)); docs/numerics.md states it. Axis lengths up to
MAX_FFT_LENGTH (the twiddle matrices are program constants).
"""

from __future__ import annotations

import re

import numpy as np

from hlo_lowering.errors import CompileError, UNIMPLEMENTED
from hlo_lowering.ir import Op, Value
from hlo_lowering.passes.complex_arithmetic import F32
from hlo_lowering.passes.expansion import Emitter

# 1024 × 1024 f32 twiddles are 4 MiB per matrix (two per transformed axis).
MAX_FFT_LENGTH = 1024

Parts = tuple[Value, Value | None]  # (real, imaginary or None for a real operand)


def fft_type(op: Op) -> str:
  """"FFT", "IFFT", "RFFT" or "IRFFT" (the attribute arrives as its MLIR text)."""
  return re.findall(r"[A-Z]+", str(op.attrs["fft_type"]))[-1]


def _twiddles(n_in: int, n_out: int, length: int, inverse: bool, hermitian: bool = False):
  """(Wr, Wi), [n_in, n_out]: exp(±2πi·jk/length), /length when inverse; `hermitian`: rows
  k weighted 2 but for DC and Nyquist (the half spectrum stands for the whole)."""
  j = np.arange(n_in, dtype=np.int64)[:, None]
  k = np.arange(n_out, dtype=np.int64)[None, :]
  angle = 2 * np.pi * ((j * k) % length) / length
  sign = 1.0 if inverse else -1.0
  scale = 1.0 / length if inverse else 1.0
  wr, wi = np.cos(angle) * scale, sign * np.sin(angle) * scale
  if hermitian:
    weight = np.full((n_in, 1), 2.0)
    weight[0] = 1.0
    if length % 2 == 0:
      weight[length // 2] = 1.0
    wr, wi = wr * weight, wi * weight
  return wr.astype(np.float32), wi.astype(np.float32)


class _Dft:
  """Appends the DFT matmuls of one fft op (through its Emitter)."""

  def __init__(self, e: Emitter):
    self.e = e

  def constant(self, array: np.ndarray) -> Value:
    return self.e.emit("stablehlo.constant", [], array.shape, F32, {"value": array})

  def matmul(self, x: Value, axis: int, w: Value) -> Value:
    """x with `axis` contracted against w's rows, the result's new axis put back at `axis`."""
    shape = [d for i, d in enumerate(x.shape) if i != axis] + [w.shape[1]]
    dims = {"lhs_batching_dimensions": [], "rhs_batching_dimensions": [],
            "lhs_contracting_dimensions": [axis], "rhs_contracting_dimensions": [0]}
    product = self.e.emit("stablehlo.dot_general", [x, w], shape, F32,
                          {"dot_dimension_numbers": dims})
    rank = x.type.rank
    permutation = list(range(axis)) + [rank - 1] + list(range(axis, rank - 1))
    return self.e.transpose(product, permutation)

  def axis(self, x: Parts, axis: int, twiddles) -> tuple[Value, Value]:
    """The complex product of x's `axis` with the matrix (Wr, Wi)."""
    xr, xi = x
    wr, wi = (self.constant(w) for w in twiddles)
    re, im = self.matmul(xr, axis, wr), self.matmul(xr, axis, wi)
    if xi is None:
      return re, im
    re = self.e.binary("subtract", re, self.matmul(xi, axis, wi))
    im = self.e.binary("add", im, self.matmul(xi, axis, wr))
    return re, im

  def real_axis(self, x: Parts, axis: int, twiddles) -> Value:
    """The real part only: xr·Wr − xi·Wi (IRFFT's last axis)."""
    xr, xi = x
    wr, wi = (self.constant(w) for w in twiddles)
    return self.e.binary("subtract", self.matmul(xr, axis, wr), self.matmul(xi, axis, wi))


def _check_lengths(op: Op, lengths: list[int]) -> None:
  for n in lengths:
    if n > MAX_FFT_LENGTH:
      raise CompileError(f"{op.describe()}: an FFT axis of length {n} is longer than trn's "
                         f"{MAX_FFT_LENGTH} (FFTs run as DFT matmuls with constant twiddle "
                         "matrices): split the transform or run it on the CPU", UNIMPLEMENTED)


def lower_fft(op: Op, e: Emitter, operand: Parts) -> list:
  """The results of `op` (a pair, or a real value for IRFFT) from its operand's parts."""
  kind = fft_type(op)
  lengths = [int(n) for n in op.attrs["fft_length"]]
  _check_lengths(op, lengths)
  dft = _Dft(e)
  rank = operand[0].type.rank
  axes = list(range(rank - len(lengths), rank))
  x: Parts = operand
  if kind in ("FFT", "IFFT"):
    for axis, n in zip(axes, lengths):
      x = dft.axis(x, axis, _twiddles(n, n, n, kind == "IFFT"))
    return [x]
  if kind == "RFFT":
    n = lengths[-1]
    x = dft.axis(x, axes[-1], _twiddles(n, n // 2 + 1, n, False))
    for axis, m in zip(axes[:-1], lengths[:-1]):
      x = dft.axis(x, axis, _twiddles(m, m, m, False))
    return [x]
  if kind == "IRFFT":
    for axis, m in zip(axes[:-1], lengths[:-1]):
      x = dft.axis(x, axis, _twiddles(m, m, m, True))
    n = lengths[-1]
    return [dft.real_axis(x, axes[-1], _twiddles(n // 2 + 1, n, n, True, hermitian=True))]
  raise CompileError(f"{op.describe()}: unknown fft_type {kind!r}", UNIMPLEMENTED)
