"""Launch grids over the two physical cores of an LNC=2 device (jax_trn/nki/cores.py): which core
runs which program, results bit-identical to the same work on one core, both cores in the
modeled time (NumPy path and inside jax.jit), and kernels whose programs would race across the
cores refused at their lines."""

import jax
import ml_dtypes
import numpy as np
import pytest

import jax_trn
import jax_trn.nki.isa as nisa
import jax_trn.nki.language as nl
import nki_tutorial_kernels as tutorial
from jax_trn import kernels, nki
from jax_trn.kernels import attention_backward
from jax_trn.nki.cores import core_of

pytest.importorskip("jax_trn._native", reason="jax_trn._native is not built", exc_type=ImportError)

rng = np.random.default_rng(5)
BF16 = ml_dtypes.bfloat16


def _normal(shape, dtype=np.float32):
  return rng.standard_normal(shape).astype(dtype)


def test_the_core_dimension_gives_each_core_half_of_its_programs():
  assert [core_of((4,), (i,)) for i in range(4)] == [0, 0, 1, 1]
  assert [core_of((nl.nc(2), 3), (i, j)) for i in range(2) for j in range(3)] == [0] * 3 + [1] * 3
  assert [core_of((3, nl.nc(2)), (i, j)) for i in range(3) for j in range(2)] == [0, 1] * 3
  assert [core_of((3,), (i,)) for i in range(3)] == [0, 0, 0]  # odd and unmarked: one core


def test_grid_runs_on_both_cores_with_the_one_core_results(monkeypatch):
  a, b = _normal((4 * 128, 48)), _normal((4 * 128, 48))
  kernel = tutorial.tensor_add_grid[4]
  assert {inst.core for inst in kernel.trace(a, b).instructions} == {0, 1}
  both = kernel.simulate(a, b)
  assert both.profile.engine_busy_ns("DVE") > 0 and both.profile.engine_busy_ns("DVE@1") > 0
  monkeypatch.setenv("TRN_LNC", "1")  # a one-core device: the programs fold onto core 0
  one = kernel.simulate(a, b)
  assert one.profile.engine_busy_ns("DVE@1") == 0
  np.testing.assert_array_equal(both.outputs[0], one.outputs[0])
  np.testing.assert_array_equal(both.outputs[0], a + b)
  assert both.device_time_ns < one.device_time_ns


def _core_1_busy_ns(profile) -> float:
  return sum(profile.engine_busy_ns(f"{engine}@1") for engine in ("PE", "ACT", "DVE"))


def _library_cases():
  q, k, v = _normal((4, 300, 64), BF16), _normal((2, 300, 64), BF16), _normal((2, 300, 64), BF16)
  return {
      "rmsnorm": (kernels.rmsnorm.rmsnorm_kernel, (_normal((3, 131, 1100), BF16),
                                                  _normal((1100,), BF16)), {}),  # 2 PSUM tiles
      "layernorm": (kernels.layernorm.layernorm_kernel, (_normal((517, 96)), _normal((96,)),
                                                        _normal((96,))), {}),
      "softmax": (kernels.softmax.softmax_kernel, (_normal((2, 259, 333), BF16),), {}),
      "attention": (kernels.attention.flash_attention_kernel, (q, k, v), {"causal": True}),
      "matmul_bias_act": (kernels.matmul_bias_act.matmul_bias_act_kernel,
                          (_normal((300, 200), BF16), _normal((200, 136), BF16),
                           _normal((136,), BF16)), {"act": "silu"}),
      "rotary": (kernels.rotary.rotary_kernel, (_normal((3, 260, 64)), _normal((260, 32)),
                                                _normal((260, 32))), {}),
      "attention backward": (attention_backward.flash_attention_backward_kernel,
                             (q, k, v, _normal((4, 300, 64), BF16), _normal((4, 300, 64), BF16),
                              _normal((4, 300))), {"causal": True}),
  }


@pytest.mark.parametrize("name", sorted(_library_cases()))
def test_library_kernel_on_two_cores_is_bit_identical_to_one_program(name):
  kernel, args, kwargs = _library_cases()[name]
  assert kernel.grid == (2,)
  both = kernel.simulate(*args, **kwargs)
  assert _core_1_busy_ns(both.profile) > 0
  alone = nki.jit(kernel.fn).simulate(*args, **kwargs)  # no grid: every tile in one program
  assert _core_1_busy_ns(alone.profile) == 0
  for two_core, one_core in zip(both.outputs, alone.outputs):
    np.testing.assert_array_equal(two_core, one_core)
  assert both.device_time_ns < alone.device_time_ns


def test_library_kernel_inside_jit_uses_both_cores(trn):
  x, gamma = _normal((512, 256)), _normal((256,))
  compiled = jax.jit(kernels.rmsnorm.rmsnorm_kernel)
  result = jax.block_until_ready(compiled(jax.device_put(x, trn), jax.device_put(gamma, trn)))
  profile = jax_trn.last_execution(trn)
  assert profile.engine_busy_ns("ACT") > 0 and profile.engine_busy_ns("ACT@1") > 0
  np.testing.assert_array_equal(np.asarray(result), kernels.rmsnorm.rmsnorm_kernel(x, gamma))


@nki.jit
def _scratch_handed_between_programs(a):
  """Program 0 writes an HBM scratch tensor that program 1 reads: a race across the cores."""
  out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
  scratch = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
  tile = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
  if nl.program_id(0) == 0:
    nisa.dma_copy(dst=tile, src=a)
    nisa.dma_copy(dst=scratch, src=tile)  # WRITES SCRATCH
  else:
    nisa.dma_copy(dst=tile, src=scratch)  # READS SCRATCH
    nisa.dma_copy(dst=out, src=tile)
  return out


def test_programs_racing_across_cores_are_refused_naming_both_lines():
  with pytest.raises(nki.KernelError, match="race on HBM tensor") as info:
    _scratch_handed_between_programs[2].trace(_normal((128, 8)))
  message = str(info.value)
  assert "READS SCRATCH" in message  # the kernel line quoted: the reader's
  lines = [n for n, text in enumerate(open(__file__).read().splitlines(), 1)
           if text.endswith(("# WRITES SCRATCH", "# READS SCRATCH"))]
  assert all(f"test_nki_lnc_grid.py:{n}" in message for n in lines)
  # on one core (an odd grid) the programs run one after another: no race
  _scratch_handed_between_programs[1].trace(_normal((128, 8)))


_held = {}


@nki.jit
def _tile_kept_across_programs(a):
  out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
  if nl.program_id(0) == 0:
    _held["tile"] = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=_held["tile"], src=a)
  rows = a.shape[0] // 2
  me = nl.program_id(0)
  nisa.dma_copy(dst=out[me * rows:(me + 1) * rows, :],
                src=_held["tile"][me * rows:(me + 1) * rows, :])
  return out


def test_a_tile_used_on_both_cores_is_refused():
  with pytest.raises(nki.KernelError, match="used by programs on both physical cores"):
    _tile_kept_across_programs[2].trace(_normal((128, 8)))


@pytest.mark.parametrize("grid, message", [
    ((nl.nc(3),), "must be a multiple of it"),
    ((nl.nc(2), nl.nc(2)), "at most one dim"),
])
def test_grids_that_do_not_fit_the_cores_are_refused(grid, message):
  with pytest.raises(nki.KernelError, match=message):
    tutorial.tensor_add_grid[grid]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_attention_backward_shares_dq_across_the_core_barrier(causal, cpu):
  """Five key groups (owners 0, 1, 1, 0, 0): each core's dQ share meets the other's across
  nisa.core_barrier; bit-identical to one program (which keeps the same two shares) and the
  reference's gradients."""
  q, d_out = _normal((2, 2100, 32)), _normal((2, 2100, 32))
  k, v = _normal((1, 2100, 32)), _normal((1, 2100, 32))
  out, lse = kernels.attention.flash_attention_kernel(q, k, v, causal=causal, with_lse=True)
  kernel = attention_backward.flash_attention_backward_kernel
  both = kernel(q, k, v, out, d_out, lse, causal=causal)
  alone = nki.jit(kernel.fn)(q, k, v, out, d_out, lse, causal=causal)
  reference = jax.jit(lambda *a: jax.vjp(
      lambda q, k, v: attention_backward.reference(q, k, v, causal=causal), *a)[1](d_out))(
          *[jax.device_put(a, cpu) for a in (q, k, v)])
  for two_core, one_core, expected in zip(both, alone, reference, strict=True):
    np.testing.assert_array_equal(two_core, one_core)
    np.testing.assert_allclose(two_core, np.asarray(expected), rtol=1e-4, atol=1e-4)
