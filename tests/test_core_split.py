"""The compiler's split of an LNC=2 device's work between its two physical cores
(lowering/core_split.py): matmuls, elementwise ops, row fusions and attention give results
bit-identical to one core's program, match the JAX CPU backend, and keep both cores' engines
busy; without the device's LNC the program is one core's."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from compiler_harness import artifact, check, compile_code, native
from hlo_lowering.program import read_program

_rng = np.random.RandomState(0)


def test_without_the_device_lnc_or_below_the_split_size_the_program_is_one_core():
  a = np.ones((512, 512), np.float32)
  assert read_program(compile_code(artifact(lambda a, b: a @ b, a, a))).cores == 1
  small = np.ones((128, 128), np.float32)
  assert read_program(compile_code(artifact(lambda a, b: a @ b + 1, small, small),
                                   lnc=2)).cores == 1


def _bf16(*shape):
  return _rng.randn(*shape).astype(ml_dtypes.bfloat16)


def _attention(q, k, v):
  s = jnp.einsum("hqd,hkd->hqk", q, k) / 8.0
  return jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(s, axis=-1), v)


CASES = {
    "matmul split by n-blocks": (lambda a, b: a @ b, (_bf16(1024, 512), _bf16(512, 1024))),
    "matmul split by m-tiles": (lambda a, b: a @ b, (_bf16(1024, 512), _bf16(512, 512))),
    "batched matmul split by batches": (lambda a, b: jnp.einsum("bmk,bkn->bmn", a, b),
                                        (_bf16(4, 256, 256), _bf16(4, 256, 512))),
    "elementwise split by tiles": (lambda x, y: x * 2 + y,
                                   (_rng.randn(4096, 512).astype(np.float32),
                                    _rng.randn(4096, 512).astype(np.float32))),
    "row fusion (softmax) split by row blocks": (lambda x: jax.nn.softmax(x, axis=-1),
                                                (_rng.randn(2048, 256).astype(np.float32),)),
    "attention": (_attention, (_bf16(16, 256, 64), _bf16(16, 256, 64), _bf16(16, 256, 64))),
    "concatenate as DMA copies": (lambda x, y: jnp.concatenate([x, y], axis=1),
                                  (_rng.randn(2048, 512).astype(np.float32),
                                   _rng.randn(2048, 512).astype(np.float32))),
    "transpose on GpSimd": (lambda x: x.T + 0, (_rng.randn(1024, 1024).astype(np.float32),)),
}
# The engine each case keeps busy on both cores.
ENGINES = {"transpose on GpSimd": "POOL", "elementwise split by tiles": "DVE",
           "row fusion (softmax) split by row blocks": "DVE", "concatenate as DMA copies": "DMA0"}


@pytest.mark.parametrize("name", CASES)
def test_split_is_bit_identical_to_one_core_and_matches_cpu(name):
  f, args = CASES[name]
  program = check(f, *args, lnc=2, scale=4.0)
  assert read_program(program).cores == 2
  one_core = compile_code(artifact(f, *args), lnc=1)
  assert read_program(one_core).cores == 1
  inputs = [np.asarray(a) for a in args]
  expected, _ = native().run_program(one_core, inputs)
  actual, profile = native().run_program(program, inputs)
  for e, a in zip(expected, actual):
    np.testing.assert_array_equal(np.asarray(a).view(np.uint8), np.asarray(e).view(np.uint8))
  engine = ENGINES.get(name, "PE")
  busy = profile["streams"]
  assert busy[engine]["busy_ns"] > 0 and busy[f"{engine}@1"]["busy_ns"] > 0
  assert busy[f"{engine}@1"]["busy_ns"] == pytest.approx(busy[engine]["busy_ns"], rel=0.5)
