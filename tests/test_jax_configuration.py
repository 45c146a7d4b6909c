"""Registration and configuration as a user meets them, each in a fresh process (the backend is
configured once per process): the default backend, JAX_PLATFORMS, TRN_* variables and
jax_trn.configure()."""

import json
import textwrap

import pytest

from fresh_process import run_python

# A source tree built in place has no jax_plugins entry point; conftest registers it, and so
# must the child processes.
_PRELUDE = textwrap.dedent("""
    import json
    from importlib import metadata
    if not any(ep.name == "trn" for ep in metadata.entry_points(group="jax_plugins")):
      from jax_trn import plugin
      plugin.initialize()
    import jax
""")


def _run(*body: str, **env) -> dict:
  """Runs the code pieces (each dedented on its own) in a fresh process; its last line is JSON."""
  result = run_python(_PRELUDE + "".join(textwrap.dedent(b) for b in body), env)
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(result.stdout.strip().splitlines()[-1])


_DESCRIBE = """
    devices = jax.devices("trn")
    print(json.dumps({"default": jax.default_backend(), "count": len(devices),
                      "kind": devices[0].device_kind,
                      "coords": [list(d.coords) + [d.core_on_chip] for d in devices],
                      "hbm": devices[0].memory_stats()["bytes_limit"]}))
"""


def test_defaults_are_one_trn2_chip_at_lnc2():
  info = _run(_DESCRIBE)
  assert info["default"] == "trn"
  assert info["count"] == 4
  assert "trn2" in info["kind"] and "simulated" in info["kind"]
  assert info["coords"] == [[0, 0, 0, 0], [0, 0, 0, 1], [0, 0, 0, 2], [0, 0, 0, 3]]
  assert info["hbm"] == 96 * 2**30 // 4


@pytest.mark.parametrize("env,count,generation", (
    ({"TRN_LNC": "1"}, 8, "trn2"),
    ({"TRN_CHIPS": "2"}, 8, "trn2"),
    ({"TRN_TARGET": "trn1"}, 2, "trn1"),
    ({"TRN_TARGET": "trn3", "TRN_CHIPS": "2"}, 16, "trn3"),
))
def test_environment_sets_target_chips_and_lnc(env, count, generation):
  info = _run(_DESCRIBE, **env)
  assert info["count"] == count
  assert generation in info["kind"]


def test_hbm_capacity_variable():
  assert _run(_DESCRIBE, TRN_HBM_BYTES=str(1 << 30))["hbm"] == 1 << 30


def test_configure_before_the_backend_starts():
  info = _run("""
      import jax_trn
      jax_trn.configure(target="trn1", chips=3)
  """, _DESCRIBE)
  assert info["count"] == 6 and "trn1" in info["kind"]


def test_configure_after_the_backend_started_is_an_error():
  info = _run("""
      import jax_trn
      jax.devices("trn")
      try:
        jax_trn.configure(chips=2)
        print(json.dumps({"error": None}))
      except RuntimeError as e:
        print(json.dumps({"error": str(e)}))
  """)
  assert "before the trn backend starts" in info["error"]


@pytest.mark.parametrize("kwargs,message", (
    ({"target": "trn9"}, "unknown Trainium target"),
    ({"lnc": 4}, "supports LNC"),
    ({"chips": 0}, "positive integer"),
))
def test_configure_rejects_bad_values(kwargs, message):
  info = _run(f"""
      import jax_trn
      try:
        jax_trn.configure(**{kwargs!r})
        print(json.dumps({{"error": None}}))
      except ValueError as e:
        print(json.dumps({{"error": str(e)}}))
  """)
  assert message in info["error"]


def test_jax_platforms_cpu_leaves_trn_out():
  info = _run("""
      print(json.dumps({"default": jax.default_backend(),
                        "platforms": sorted({d.platform for d in jax.devices()})}))
  """, JAX_PLATFORMS="cpu")
  assert info == {"default": "cpu", "platforms": ["cpu"]}


def test_jax_platforms_trn_runs_only_trn():
  info = _run("""
      import jax.numpy as jnp
      y = jnp.arange(4.0) * 2
      print(json.dumps({"default": jax.default_backend(), "platform": y.devices().pop().platform,
                        "value": y.tolist()}))
  """, JAX_PLATFORMS="trn")
  assert info == {"default": "trn", "platform": "trn", "value": [0.0, 2.0, 4.0, 6.0]}


def test_cpu_stays_usable_beside_trn():
  info = _run("""
      import numpy as np
      cpu = jax.devices("cpu")[0]
      y = jax.jit(lambda v: v + 1)(jax.device_put(np.ones(3, np.float32), cpu))
      print(json.dumps({"platform": y.devices().pop().platform, "value": y.tolist()}))
  """)
  assert info == {"platform": "cpu", "value": [2.0, 2.0, 2.0]}
