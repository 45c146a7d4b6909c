"""The layouts extension (pjrt_plugin/layouts_extension.*): an executable's output layouts are
those of the buffers it returns (dense row-major) and the CPU backend's for the same program,
buffers report the layout executables expect, and a persistent-cache hit serves the cold
compile's as_text() and layouts."""

import json
import textwrap

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from fresh_process import run_python

PROGRAMS = {
    "transpose and scalar": (lambda a: (a.T * 2, a + 1, a.sum()), [((4, 8), np.float32)]),
    "one output, rank 3": (lambda a: jnp.transpose(a, (2, 0, 1)) + 1, [((2, 3, 4), np.float32)]),
    "bf16 matmul, int": (lambda a, b, i: (a @ b, i * 3),
                         [((8, 16), ml_dtypes.bfloat16), ((16, 4), ml_dtypes.bfloat16),
                          ((5,), np.int32)]),
    "bool, rank 4": (lambda a: a.reshape(2, 2, 2, 3) > 0.5, [((4, 6), np.float32)]),
}


def _output_layouts(fn, specs, platform):
  device = jax.devices(platform)[0]
  rng = np.random.default_rng(0)
  args = [jax.device_put(rng.standard_normal(shape).astype(dtype), device)
          for shape, dtype in specs]
  compiled = jax.jit(fn).lower(*args).compile()
  return compiled, args, [f.layout for f in jax.tree.leaves(compiled.output_formats)]


@pytest.mark.parametrize("name", PROGRAMS)
def test_output_layouts_are_the_returned_buffers_and_the_cpus(name):
  fn, specs = PROGRAMS[name]
  compiled, args, layouts = _output_layouts(fn, specs, "trn")
  assert layouts == _output_layouts(fn, specs, "cpu")[2]
  # Row-major, as every trn buffer is, and as each output buffer reports itself. (The HLO module
  # jaxlib converts from the StableHLO text, which as_text() prints, gives a transpose's result
  # the transposed layout; the program writes it row-major.)
  outputs = jax.tree.leaves(compiled(*args))
  assert len(outputs) == len(layouts)
  for out, layout in zip(outputs, layouts):
    assert layout.major_to_minor == tuple(range(out.ndim))
    assert out.format.layout == layout


def test_buffers_report_the_layout_executables_expect():
  trn = jax.devices("trn")[0]
  x = jax.device_put(np.ones((3, 5, 7), np.float32), trn)
  compiled = jax.jit(lambda a: a * 2).lower(x).compile()
  (param,), _ = compiled.input_formats
  assert x.format.layout == param.layout
  assert x.format.layout.major_to_minor == (0, 1, 2)
  np.testing.assert_array_equal(np.asarray(compiled(x)), np.full((3, 5, 7), 2, np.float32))


# A cold compile into an empty cache, then the same function compiled again after JAX's
# in-memory caches are cleared: the persistent cache serves it (a hit), and what JAX reads of the
# executable must be what the cold compile gave.
_HIT_SCRIPT = textwrap.dedent("""
    import json
    from importlib import metadata
    if not any(ep.name == "trn" for ep in metadata.entry_points(group="jax_plugins")):
      from jax_trn import plugin
      plugin.initialize()
    import jax, jax.numpy as jnp, numpy as np
    from jax_trn import compilation
    trn = jax.devices("trn")[0]
    x = jax.device_put(np.arange(32, dtype=np.float32).reshape(4, 8), trn)
    def step(a):
      return a.T @ a, jnp.tanh(a).T, a.sum(axis=0)
    def observe():
      compiled = jax.jit(step).lower(x).compile()
      return {"text": compiled.as_text(),
              "outputs": [str(f.layout) for f in jax.tree.leaves(compiled.output_formats)],
              "inputs": [str(f.layout) for f in jax.tree.leaves(compiled.input_formats)],
              "result": [np.asarray(r).tolist() for r in compiled(x)]}
    cold = observe()
    misses = compilation.cache_stats()["misses"]
    jax.clear_caches()
    hit = observe()
    print(json.dumps({"cold": cold, "hit": hit, "misses": misses,
                      "stats": compilation.cache_stats()}))
""")


def test_cache_hit_serves_the_cold_compiles_text_and_layouts(tmp_path):
  result = run_python(_HIT_SCRIPT, {"TRN_CACHE_DIR": str(tmp_path)})
  assert result.returncode == 0, result.stderr[-3000:]
  out = json.loads(result.stdout.strip().splitlines()[-1])
  assert out["misses"] >= 1 and out["stats"]["hits"] >= 1
  assert out["stats"]["misses"] == out["misses"]  # the second compile was served, not compiled
  assert out["hit"] == out["cold"]
  assert "HloModule" in out["cold"]["text"]
