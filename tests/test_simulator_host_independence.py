"""The simulator's results and modeled timelines do not depend on the host it runs on: the same
program and inputs give the same output bits and the same per-instruction timeline with one host
thread or several (TRN_SIM_THREADS: matmul panels and elementwise chunks spread over threads) and
at every vector width of the matmul and bf16 conversion kernels (TRN_SIM_VECTOR_BITS caps it: SSE2,
AVX2, AVX-512; the wider matmuls fuse multiply-adds where every product is exact, SSE2 never does).
The golden corpus pins the results of the default configuration; this pins the others to it."""

import json
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compiler_harness import compile_fn
from fresh_process import run_python


def _layernorm(x):
  mean = jnp.mean(x, axis=1, keepdims=True)
  return (x - mean) * jax.lax.rsqrt(jnp.var(x, axis=1, keepdims=True) + 1e-5)


def _programs():
  rng = np.random.default_rng(7)
  f32 = lambda *shape: rng.standard_normal(shape, np.float32)
  bf16 = lambda *shape: f32(*shape).astype(jnp.bfloat16)
  scaled = lambda x, factor: (x.astype(np.float32) * factor).astype(x.dtype)

  def with_wide_edge(x, axis):
    x = x.copy()
    (x[-1] if axis == 0 else x[:, -1])[...] = f32(x.shape[1 - axis])
    return x
  return {
      # Row and column edges past the register blocks, and tiles large enough to split.
      "matmul_fp32": (lambda a, b: a @ b, (f32(300, 200), f32(200, 1000))),
      "matmul_bf16": (lambda a, b: a @ b, (bf16(256, 384), bf16(384, 600))),
      # Products in fp32's subnormal range (~1e-44) and past its largest (~1e39): a fused
      # multiply-add would round these differently, so the wider kernels must not fuse them.
      "matmul_bf16_subnormal_products": (lambda a, b: a @ b, (scaled(bf16(128, 256), 1e-22),
                                                              scaled(bf16(256, 300), 1e-22))),
      "matmul_bf16_overflowing_products": (lambda a, b: a @ b, (scaled(bf16(128, 256), 1e20),
                                                                scaled(bf16(256, 300), 1e19))),
      # bf16-valued fp32 operands except the edge column and row past the register blocks, which
      # hold full fp32 values: the panels may fuse (their products are exact), the edges never.
      "matmul_narrow_panels_wide_edges": (lambda a, b: a @ b, (
          with_wide_edge(bf16(130, 256).astype(np.float32), axis=0),
          with_wide_edge(bf16(256, 601).astype(np.float32), axis=1))),
      "elementwise_chain": (lambda x, y: jnp.tanh(x * 1.5 + y) * x - jnp.exp(-jnp.abs(y)),
                            (f32(512, 1030), f32(512, 1030))),
      "layernorm": (_layernorm, (f32(384, 1000),)),
      "row_reductions": (lambda x: (jnp.sum(x, axis=1), jnp.max(x, axis=1)), (f32(300, 777),)),
      # Rows of odd length through the bf16 narrowing and widening kernels and their tails.
      "bf16_conversions": (lambda x, y: ((x * 3).astype(jnp.bfloat16),
                                         y.astype(jnp.float32) * 2),
                           (f32(256, 1031), bf16(256, 1031))),
  }


_RUN = textwrap.dedent("""
    import hashlib, json, os, pathlib
    import ml_dtypes
    import numpy as np
    from jax_trn import _native
    directory = pathlib.Path(os.environ["PROGRAM_DIRECTORY"])
    digests = {}
    for name in json.loads((directory / "names.json").read_text()):
      program = (directory / f"{name}.trn").read_bytes()
      # Saved as raw bits (npz does not keep bfloat16), with the dtype names beside them.
      dtypes = json.loads((directory / f"{name}.dtypes.json").read_text())
      raw = np.load(directory / f"{name}.npz")
      inputs = [raw[f"arr_{i}"].view(np.dtype(getattr(ml_dtypes, d, d))) for i, d in enumerate(dtypes)]
      outputs, profile = _native.run_program(program, inputs, record_timeline=True)
      h = hashlib.sha256()
      for out in outputs:
        h.update(np.ascontiguousarray(out).tobytes())
      timeline = json.dumps([profile["device_time_ns"], profile["timeline"]], sort_keys=True)
      digests[name] = [h.hexdigest(), hashlib.sha256(timeline.encode()).hexdigest()]
    print(json.dumps(digests))
""")


@pytest.fixture(scope="module")
def program_directory(tmp_path_factory):
  directory = tmp_path_factory.mktemp("host_independence")
  names = []
  for name, (fn, args) in _programs().items():
    (directory / f"{name}.trn").write_bytes(compile_fn(fn, *args))
    arrays = [np.asarray(a) for a in args]
    np.savez(directory / f"{name}.npz", *[a.view(f"u{a.itemsize}") for a in arrays])
    (directory / f"{name}.dtypes.json").write_text(json.dumps([str(a.dtype) for a in arrays]))
    names.append(name)
  (directory / "names.json").write_text(json.dumps(names))
  return directory


def _digests(directory, **env) -> dict:
  env = {"PROGRAM_DIRECTORY": str(directory), **{k: str(v) for k, v in env.items()}}
  result = run_python(_RUN, env)
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(result.stdout.strip().splitlines()[-1])


def test_results_and_timelines_are_the_same_at_any_thread_count_and_vector_width(program_directory):
  reference = _digests(program_directory, TRN_SIM_THREADS=1, TRN_SIM_VECTOR_BITS=128)
  assert set(reference) == set(_programs())
  for env in ({"TRN_SIM_THREADS": 2, "TRN_SIM_VECTOR_BITS": 256},
              {"TRN_SIM_THREADS": 3, "TRN_SIM_VECTOR_BITS": 512},
              {}):
    assert _digests(program_directory, **env) == reference, env
