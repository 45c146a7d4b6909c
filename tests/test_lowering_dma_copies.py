"""concatenate and slice in long contiguous runs are DMA copies spread over the queues (native),
matching the CPU backend; copies in short runs stay GpSimd copies; the DMA copy is faster. A
transpose that is not a view and keeps its innermost dim (attention's head merge) is DMA copies
in runs of that dim; one that moves the innermost dim stays GpSimd."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import compiler_harness as harness
from hlo_lowering.lowering import dma_copies
from jax_trn import compilation


def _data(shape, dtype, seed=0):
  return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _kind(name):
  (kind,) = compilation.last_report().summary()[name]
  return kind


CASES = [  # (name, f, shapes, dtype, the lowering the op gets)
    ("concat last dim", lambda a, b: jnp.concatenate([a, b, a], -1), [(300, 256), (300, 128)],
     np.float32, "native"),
    ("concat first dim", lambda a, b: jnp.concatenate([a, b], 0), [(7, 3, 130), (5, 3, 130)],
     ml_dtypes.bfloat16, "native"),
    ("concat short rows", lambda a, b: jnp.concatenate([a, b], -1), [(64, 5), (64, 3)],
     np.float32, "gpsimd"),
    ("slice rows and columns", lambda a: a[3:290, 128:900], [(300, 1024)], np.float32, "native"),
    ("slice a whole 1-D run", lambda a: a[100:5000], [(8192,)], np.int32, "native"),
    ("slice with steps", lambda a: a[3:290:2, 1:900:3], [(300, 1024)], np.float32, "gpsimd"),
    ("head merge", lambda x: jnp.sin(x.transpose(0, 2, 1, 3)), [(2, 16, 130, 64)],
     ml_dtypes.bfloat16, "native"),
    ("head merge of short rows", lambda x: jnp.sin(x.transpose(0, 2, 1, 3)), [(2, 4, 30, 8)],
     np.float32, "gpsimd"),
    ("2-D transpose", lambda x: jnp.sin(x.T), [(300, 200)], np.float32, "gpsimd"),
]


@pytest.mark.parametrize("name,f,shapes,dtype,kind", CASES, ids=[c[0] for c in CASES])
def test_copies_match_cpu_and_take_dma_in_long_runs(name, f, shapes, dtype, kind):
  args = [_data(s, dtype, i) for i, s in enumerate(shapes)]
  harness.check(f, *args)
  op = ("stablehlo.concatenate" if "concat" in name else
        "stablehlo.slice" if "slice" in name else "stablehlo.transpose")
  assert _kind(op) == kind, name


def _device_time_ns(f, args) -> float:
  program = compilation.compile_text(jax.jit(f).lower(*args).as_text())
  return harness.native().run_program(program, args)[1]["device_time_ns"]


def test_dma_copy_beats_the_gpsimd_copy(monkeypatch):
  args = [_data((2048, 1024), np.float32, i) for i in range(2)]
  concat = lambda a, b: jnp.concatenate([a, b], -1)
  native = _device_time_ns(concat, args)
  monkeypatch.setattr(dma_copies, "MIN_RUN_BYTES", 1 << 40)  # every copy declines to GpSimd
  gpsimd = _device_time_ns(concat, args)
  assert _kind("stablehlo.concatenate") == "gpsimd"
  assert native < 0.25 * gpsimd, (native, gpsimd)


def test_dma_transpose_beats_the_gpsimd_copy(monkeypatch):
  args = [_data((16, 512, 64), ml_dtypes.bfloat16)]
  merge = lambda x: jnp.sin(x.transpose(1, 0, 2))
  native = _device_time_ns(merge, args)
  assert _kind("stablehlo.transpose") == "native"
  monkeypatch.setattr(dma_copies, "MIN_TRANSPOSE_RUN_BYTES", 1 << 40)
  gpsimd = _device_time_ns(merge, args)
  assert _kind("stablehlo.transpose") == "gpsimd"
  assert native < 0.5 * gpsimd, (native, gpsimd)
