"""nisa.core_barrier: the two physical cores' programs exchange data through HBM across a
barrier (jax_trn/nki/programs.py traces them in turn, switching at it), with the same result
on NumPy arrays, inside jax.jit and on a one-core device; barriers that cannot work on a chip
are refused."""

import re

import jax
import numpy as np
import pytest

import jax_trn.nki.isa as nisa
import jax_trn.nki.language as nl
from hlo_lowering.program.kernel_program import KernelProgram
from jax_trn import nki

pytest.importorskip("jax_trn._native", reason="jax_trn._native is not built", exc_type=ImportError)

rng = np.random.default_rng(7)


def _swap_halves(a, barrier: bool):
  """Each core doubles its half of `a` into a shared scratch tensor, then (after the barrier)
  stores the other core's half: out is 2a with its halves swapped."""
  rows = a.shape[0] // 2
  me = nl.program_id(0)
  mine, theirs = slice(me * rows, (me + 1) * rows), slice((1 - me) * rows, (2 - me) * rows)
  out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
  scratch = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
  tile = nl.ndarray((rows, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
  nisa.dma_copy(dst=tile, src=a[mine, :])
  doubled = nl.ndarray(tile.shape, dtype=a.dtype, buffer=nl.sbuf)
  nisa.tensor_scalar(dst=doubled, data=tile, op0=nl.multiply, operand0=2.0)
  nisa.dma_copy(dst=scratch[mine, :], src=doubled)  # WRITES ITS HALF
  if barrier:
    nisa.core_barrier(scratch, (0, 1))
  other = nl.ndarray(tile.shape, dtype=a.dtype, buffer=nl.sbuf)
  nisa.dma_copy(dst=other, src=scratch[theirs, :])  # READS THE OTHER HALF
  nisa.dma_copy(dst=out[mine, :], src=other)
  return out


@nki.jit
def _exchange(a):
  return _swap_halves(a, barrier=True)


@nki.jit
def _exchange_without_barrier(a):
  return _swap_halves(a, barrier=False)


A = rng.standard_normal((256, 40)).astype(np.float32)
EXPECTED = np.concatenate([2 * A[128:], 2 * A[:128]])


def test_cores_exchange_halves_across_a_barrier(monkeypatch, trn):
  kernel = _exchange[nl.nc(2)]
  program = kernel.trace(A)
  assert {(inst.core, inst.epoch) for inst in program.instructions} == {
      (0, 0), (1, 0), (0, 1), (1, 1)}
  both = kernel.simulate(A)
  np.testing.assert_array_equal(both.outputs[0], EXPECTED)
  assert both.profile.engine_busy_ns("DVE") > 0 and both.profile.engine_busy_ns("DVE@1") > 0
  np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(jax.device_put(A, trn))), EXPECTED)
  monkeypatch.setenv("TRN_LNC", "1")  # one core: epoch by epoch, core 0's programs first
  np.testing.assert_array_equal(kernel(A), EXPECTED)


@nki.jit
def _handed_to_core_1(a):
  """Core 0 computes a result into HBM; core 1, which has nothing to do before the barrier,
  reads it after: only the barrier's ordering makes it wait for core 0."""
  out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
  scratch = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
  if nl.program_id(0) == 0:
    tile = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=a)
    doubled = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=doubled, data=tile, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=scratch, src=doubled)
  nisa.core_barrier(scratch, (0, 1))
  if nl.program_id(0) == 1:
    copied = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=copied, src=scratch)
    nisa.dma_copy(dst=out, src=copied)
  return out


def test_a_core_waits_at_the_barrier_for_the_other_cores_write(trn):
  kernel = _handed_to_core_1[nl.nc(2)]
  a = A[0:128]
  program = kernel.trace(a)
  # the epochs travel in the custom call's payload
  decoded = KernelProgram.decode(program.encode())
  assert [i.epoch for i in decoded.instructions] == [i.epoch for i in program.instructions]
  np.testing.assert_array_equal(kernel(a), 2 * a)
  np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(jax.device_put(a, trn))), 2 * a)


def test_the_same_exchange_without_the_barrier_is_a_race():
  with pytest.raises(nki.KernelError, match="race on HBM tensor") as info:
    _exchange_without_barrier[nl.nc(2)].trace(A)
  assert "nisa.core_barrier" in str(info.value)


@nki.jit
def _barrier_on_one_core_only(a):
  out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
  if nl.program_id(0) == 0:
    nisa.core_barrier(out, (0, 1))
  tile = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
  nisa.dma_copy(dst=tile, src=a[0:128, :])
  if nl.program_id(0) == 1:
    nisa.dma_copy(dst=out[0:128, :], src=tile)
  return out


@nki.jit
def _barrier_on_a_tile(a):
  tile = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
  nisa.core_barrier(tile, (0, 1))
  return a


@pytest.mark.parametrize("kernel, message", [
    (_barrier_on_one_core_only[nl.nc(2)], "must reach every barrier"),
    (_exchange[4], "launch it as kernel[nl.nc(2)]"),
    (_exchange, "launch it as kernel[nl.nc(2)]"),
    (_barrier_on_a_tile[nl.nc(2)], "must be the shared HBM tensor"),
])
def test_barriers_a_chip_could_not_run_are_refused(kernel, message):
  with pytest.raises(nki.KernelError, match=re.escape(message)):
    kernel.trace(A)
