"""nl.device_print (jax_trn/nki/device_print.py): a tile's value at the kernel line that prints
it, printed when the kernel runs, on NumPy arrays and inside jax.jit, without changing the
kernel's results; bad uses refused at the kernel line."""

import jax
import numpy as np
import pytest

import jax_trn.nki.isa as nisa
import jax_trn.nki.language as nl
from jax_trn import nki

pytest.importorskip("jax_trn._native", reason="jax_trn._native is not built", exc_type=ImportError)

A = np.arange(12, dtype=np.float32).reshape(3, 4)


@nki.jit
def doubled_with_prints(a):
  out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
  tile = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
  nisa.dma_copy(dst=tile, src=a)
  nl.device_print("loaded", tile)
  nisa.tensor_scalar(dst=tile, data=tile, op0=nl.multiply, operand0=2.0)
  nl.device_print("doubled rows 0-1", tile[0:2, :])
  gram = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.psum)
  nisa.nc_matmul(dst=gram, stationary=tile, moving=tile)
  nl.device_print("gram (PSUM)", gram)
  nisa.dma_copy(dst=out, src=tile)
  return out


def _expected_prints() -> str:
  doubled = 2 * A
  return "".join(f"{prefix} {value}\n" for prefix, value in (
      ("loaded", A), ("doubled rows 0-1", doubled[0:2]), ("gram (PSUM)", doubled.T @ doubled)))


def test_device_print_shows_each_value_where_it_is_printed_on_numpy(capsys):
  result = doubled_with_prints(A)
  assert capsys.readouterr().out == _expected_prints()
  np.testing.assert_array_equal(result, 2 * A)
  assert len(doubled_with_prints.last_simulation.outputs) == 1


def test_device_print_inside_jit_prints_the_same(trn, capfd):
  result = jax.block_until_ready(jax.jit(doubled_with_prints)(jax.device_put(A, trn)))
  jax.effects_barrier()
  assert capfd.readouterr().out == _expected_prints()
  np.testing.assert_array_equal(np.asarray(result), 2 * A)


@nki.jit
def prints_uninitialised(a):
  tile = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
  nl.device_print("garbage", tile)  # <- nothing wrote it
  return a


@nki.jit
def prints_a_number(a):
  nl.device_print("n", 3)  # <- not a tensor
  return a


@pytest.mark.parametrize("kernel, marker, message", [
    (prints_uninitialised, "nothing wrote it", "dma_copy reads uninitialised memory"),
    (prints_a_number, "not a tensor", "print an NKI tensor"),
])
def test_bad_device_print_names_the_kernel_line(kernel, marker, message):
  with pytest.raises(nki.KernelError, match=message) as info:
    kernel.trace(A)
  assert marker in str(info.value)
