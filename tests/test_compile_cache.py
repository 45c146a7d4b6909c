"""The persistent compile cache (jax_trn/compile_cache.py): fresh processes share compiled
programs and compile reports through TRN_CACHE_DIR; invalid entries, disabling, the size cap and
concurrent writers."""

import json
import os
import subprocess
import sys
import tempfile
import textwrap

import jax.numpy as jnp
import numpy as np
import pytest

import compiler_harness as harness
from fresh_process import run_python
from jax_trn import compilation, compile_cache

# A training step (matmuls, tanh, reductions), then a couple of eager ops, on trn; prints the
# cache statistics, a hash of every program it compiled, the report texts and the results.
_SCRIPT = textwrap.dedent("""
    import hashlib, json, sys
    from importlib import metadata
    if not any(ep.name == "trn" for ep in metadata.entry_points(group="jax_plugins")):
      from jax_trn import plugin
      plugin.initialize()
    import jax, jax.numpy as jnp, numpy as np
    import jax_trn
    from jax_trn import compilation
    programs = []
    compile_for_pjrt = compilation.compile_for_pjrt
    def recording(*args):
      program = compile_for_pjrt(*args)
      programs.append(hashlib.sha256(program).hexdigest())
      return program
    compilation.compile_for_pjrt = recording
    trn = jax.devices("trn")[0]
    def loss(w, x):
      return jnp.mean(jnp.tanh(x @ w) ** 2)
    rng = np.random.default_rng(0)
    w = jax.device_put(rng.standard_normal((64, 32), np.float32), trn)
    x = jax.device_put(rng.standard_normal((16, 64), np.float32), trn)
    grad = jax.jit(jax.grad(loss))(w, x)
    reports = [jax_trn.compile_report().format()]
    y = jnp.exp(x) * 2.0
    reports.append(jax_trn.compile_report().format())
    print(json.dumps({"stats": compilation.cache_stats(), "count": compilation.compile_count(),
                      "programs": programs, "reports": reports,
                      "grad": np.asarray(grad).tolist(), "y": float(np.asarray(y).sum())}))
""")


def _run(cache_dir, **env):
  result = run_python(_SCRIPT, {"TRN_CACHE_DIR": str(cache_dir), **env})
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(result.stdout.strip().splitlines()[-1])


def _entries(directory):
  return sorted(p for p in os.listdir(directory) if p.endswith(compile_cache.SUFFIX))


def _aliases(directory):
  return sorted(p for p in os.listdir(directory) if p.endswith(compile_cache.ALIAS_SUFFIX))


def test_second_process_hits_with_identical_programs_and_reports(tmp_path):
  first = _run(tmp_path)
  n = len(first["programs"])
  assert n >= 3 and first["stats"] == {"hits": 0, "misses": n, "bypassed": 0, "compiles": n}
  assert len(_entries(tmp_path)) == n
  second = _run(tmp_path)
  assert second["stats"] == {"hits": n, "misses": 0, "bypassed": 0, "compiles": 0}
  assert second["count"] == first["count"] == n  # compile_count counts hits too
  assert second["programs"] == first["programs"]
  assert second["reports"] == first["reports"] and "compile report" in second["reports"][0]
  assert second["grad"] == first["grad"] and second["y"] == first["y"]
  # A different target misses (and stores its own entries).
  other = _run(tmp_path, TRN_TARGET="trn1")
  assert other["stats"]["misses"] == n and other["stats"]["hits"] == 0
  np.testing.assert_allclose(other["grad"], first["grad"], rtol=1e-5, atol=1e-6)


def test_disabled_cache_never_writes(tmp_path):
  home = tmp_path / "home"
  home.mkdir()
  for value in ("", "0"):
    out = _run(value, HOME=str(home))
    assert out["stats"]["hits"] == out["stats"]["misses"] == 0
    assert out["stats"]["bypassed"] == len(out["programs"])
  assert not list(home.rglob("*"))


def test_concurrent_writers_do_not_corrupt(tmp_path):
  env = {k: v for k, v in os.environ.items() if not k.startswith("TRN_") and k != "JAX_PLATFORMS"}
  env["TRN_CACHE_DIR"] = str(tmp_path)
  procs = [subprocess.Popen([sys.executable, "-c", _SCRIPT], env=env, cwd=tempfile.gettempdir(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
           for _ in range(3)]
  outs = []
  for p in procs:
    stdout, stderr = p.communicate(timeout=300)
    assert p.returncode == 0, stderr[-3000:]
    outs.append(json.loads(stdout.strip().splitlines()[-1]))
  assert all(o["programs"] == outs[0]["programs"] and o["grad"] == outs[0]["grad"] for o in outs)
  assert not [p for p in os.listdir(tmp_path)
              if not p.endswith((compile_cache.SUFFIX, compile_cache.ALIAS_SUFFIX))]
  after = _run(tmp_path)
  assert after["stats"]["hits"] == len(after["programs"]) and after["stats"]["misses"] == 0
  assert after["programs"] == outs[0]["programs"] and after["reports"] == outs[0]["reports"]


# --- in this process: the compile service reads TRN_CACHE_DIR at every compile --------------------------

def _f(v):
  return jnp.tanh(v) * 3.0 + 1.0


@pytest.fixture
def cache(tmp_path, monkeypatch):
  monkeypatch.setenv("TRN_CACHE_DIR", str(tmp_path))
  monkeypatch.delenv("TRN_CACHE_MAX_BYTES", raising=False)
  return tmp_path


def test_hit_in_process_restores_the_report(cache):
  x = np.linspace(-2, 2, 300, dtype=np.float32).reshape(3, 100)
  before = compilation.cache_stats()
  program = harness.compile_fn(_f, x)
  report = compilation.last_report()
  again = harness.compile_fn(_f, x)
  stats = compilation.cache_stats()
  assert stats["misses"] == before["misses"] + 1 and stats["hits"] == before["hits"] + 1
  assert again == program
  assert compilation.last_report() == report and compilation.last_report() is not report


def test_corrupted_entries_are_recompiled_and_rewritten(cache):
  """The entry and the alias of a request, both corrupted: a miss, and both rewritten."""
  x = np.ones((4, 50), np.float32)
  program = harness.compile_fn(_f, x)
  paths = [cache / name for name in _entries(cache) + _aliases(cache)]
  assert len(paths) == 2
  good = [path.read_bytes() for path in paths]
  for corrupt in (lambda b: b[:len(b) // 2], lambda b: b[:10], lambda b: b"",
                  lambda b: b[:200] + bytes([b[200] ^ 0xFF]) + b[201:]):
    for path, data in zip(paths, good):
      path.write_bytes(corrupt(data))
    misses = compilation.cache_stats()["misses"]
    assert harness.compile_fn(_f, x) == program
    assert compilation.cache_stats()["misses"] == misses + 1
    assert [path.read_bytes() for path in paths] == good
  harness.check(_f, x)


def _g(x):
  return jnp.sin(x) + 1.0


def test_entries_renamed_onto_each_other_are_not_served_as_each_other(cache):
  """Two valid entries swapped by name: each is refused (it records its own key) and recompiled,
  never served as the other program (that would be a wrong result). Their aliases are removed, so
  the requests reach the entries (renamed aliases: the test below)."""
  x = np.linspace(-2, 2, 200, dtype=np.float32).reshape(2, 100)
  program_f = harness.compile_fn(_f, x)
  (entry_f,) = _entries(cache)
  program_g = harness.compile_fn(_g, x)
  (entry_g,) = [e for e in _entries(cache) if e != entry_f]
  path_f, path_g = cache / entry_f, cache / entry_g
  bytes_f, bytes_g = path_f.read_bytes(), path_g.read_bytes()
  path_f.write_bytes(bytes_g)
  path_g.write_bytes(bytes_f)
  for alias in _aliases(cache):
    os.remove(cache / alias)
  misses = compilation.cache_stats()["misses"]
  assert harness.compile_fn(_f, x) == program_f
  assert harness.compile_fn(_g, x) == program_g
  assert compilation.cache_stats()["misses"] == misses + 2
  assert path_f.read_bytes() == bytes_f and path_g.read_bytes() == bytes_g
  harness.check(_g, x)

def _parse_forbidden(monkeypatch):
  def refuse(code, fmt):
    raise AssertionError("the request was parsed")
  monkeypatch.setattr(compilation.module_identity, "identify", refuse)


def test_repeated_request_is_served_through_its_alias_without_parsing(cache, monkeypatch):
  x = np.linspace(-2, 2, 300, dtype=np.float32).reshape(3, 100)
  program = harness.compile_fn(_f, x)
  assert len(_aliases(cache)) == 1 and len(_entries(cache)) == 1
  _parse_forbidden(monkeypatch)
  hits = compilation.cache_stats()["hits"]
  assert harness.compile_fn(_f, x) == program
  assert compilation.cache_stats()["hits"] == hits + 1
  harness.check(_f, x)


def test_corrupted_or_renamed_aliases_are_ignored(cache, monkeypatch):
  x = np.ones((4, 50), np.float32)
  program_f = harness.compile_fn(_f, x)
  (alias_f,) = _aliases(cache)
  program_g = harness.compile_fn(_g, x)
  (alias_g,) = [a for a in _aliases(cache) if a != alias_f]
  good_f, good_g = (cache / alias_f).read_bytes(), (cache / alias_g).read_bytes()
  for bad in (good_f[:20], b"", good_f[:40] + bytes([good_f[40] ^ 1]) + good_f[41:], good_g):
    (cache / alias_f).write_bytes(bad)
    hits = compilation.cache_stats()["hits"]
    assert harness.compile_fn(_f, x) == program_f  # through the entry, after a parse
    assert compilation.cache_stats()["hits"] == hits + 1
    assert (cache / alias_f).read_bytes() == good_f
  assert harness.compile_fn(_g, x) == program_g


def test_every_key_part_changes_the_key(monkeypatch):
  base = dict(code=b"module", fmt="mlir", compile_options=b"num_replicas=1", target="trn2",
              target_spec={"cores": 8})
  key = compile_cache.make_key(**base)
  assert compile_cache.make_key(**base) == key and len(key) == 64
  for part, other in [("code", b"module2"), ("fmt", "hlo"), ("compile_options", b"num_replicas=2"),
                      ("target", "trn1"), ("target_spec", {"cores": 2})]:
    assert compile_cache.make_key(**{**base, part: other}) != key, part
  monkeypatch.setattr(compile_cache, "_fingerprint", "v2-other-compiler-source")
  assert compile_cache.make_key(**base) != key


def test_fingerprint_covers_the_compiler_source():
  fingerprint = compile_cache.compiler_fingerprint()
  from hlo_lowering.program import writer
  assert fingerprint.startswith(f"v{writer.VERSION}-") and len(fingerprint.split("-")[1]) == 64


def test_eviction_keeps_the_directory_under_the_cap(cache, monkeypatch):
  harness.compile_fn(_f, np.ones((2, 3), np.float32))
  size = os.path.getsize(cache / _entries(cache)[0])
  cap = int(size * 2.5)
  monkeypatch.setenv("TRN_CACHE_MAX_BYTES", str(cap))
  for n in range(4, 10):
    harness.compile_fn(_f, np.ones((2, n), np.float32))
    assert sum(os.path.getsize(cache / e) for e in _entries(cache)) <= cap
  assert 1 <= len(_entries(cache)) <= 2
  # The newest entry survives: compiling it again hits.
  hits = compilation.cache_stats()["hits"]
  harness.compile_fn(_f, np.ones((2, 9), np.float32))
  assert compilation.cache_stats()["hits"] == hits + 1


def test_disabled_or_patched_pipeline_bypasses(cache, monkeypatch):
  x = np.ones((3, 3), np.float32)
  monkeypatch.setenv("TRN_CACHE_DIR", "0")
  bypassed = compilation.cache_stats()["bypassed"]
  harness.compile_fn(_f, x)
  assert compilation.cache_stats()["bypassed"] == bypassed + 1 and not _entries(cache)
  monkeypatch.setenv("TRN_CACHE_DIR", str(cache))
  monkeypatch.setenv("TRN_DUMP_IR", str(cache / "dump"))
  harness.compile_fn(_f, x)
  assert not _entries(cache) and os.listdir(cache / "dump")


# --- the key ignores source locations; a hit carries the request's ---------------------------------

_SCRIPT_SOURCE = """
import jax.numpy as jnp

def step(w, x):
  h = jnp.tanh(x @ w)
  return jnp.sum(h * h, axis=1)
"""


def _step_from(filename: str, blank_lines: int):
  """`step` as if defined in the script `filename`, `blank_lines` lines further down."""
  scope = {}
  exec(compile("\n" * blank_lines + _SCRIPT_SOURCE, filename, "exec"), scope)
  return scope["step"]


def test_same_function_from_two_scripts_is_one_entry_with_each_scripts_lines(cache, monkeypatch):
  rng = np.random.default_rng(0)
  w, x = rng.standard_normal((64, 32), np.float32), rng.standard_normal((16, 64), np.float32)
  first = harness.compile_fn(_step_from("scripts/first_script.py", 0), w, x)
  stats = compilation.cache_stats()
  second_fn = _step_from("scripts/second_script.py", 7)
  second = harness.compile_fn(second_fn, w, x)
  assert compilation.cache_stats()["hits"] == stats["hits"] + 1
  assert compilation.cache_stats()["compiles"] == stats["compiles"]
  assert len(_entries(cache)) == 1
  # The served program and report name the second script's lines, and nothing of the first.
  debug_locations = {d[2] for d in harness.native().program_info(second)["debug"]}
  assert any(loc.startswith("scripts/second_script.py:") for loc in debug_locations)
  assert not any("first_script" in loc for loc in debug_locations)
  assert "first_script" not in harness.native().program_info(second)["source"]
  report = compilation.last_report()
  lines = {op.location for op in report.ops if op.location}
  assert lines and all(loc.startswith("scripts/second_script.py:") for loc in lines)
  # Line numbers moved by exactly the 7 lines the second script inserts.
  tanh = lambda program: next(d[2] for d in harness.native().program_info(program)["debug"]
                              if d[0] == "stablehlo.tanh")
  assert int(tanh(second).split(":")[1]) == int(tanh(first).split(":")[1]) + 7
  # It is byte for byte the program a compile of the second script makes, and computes the same.
  monkeypatch.setenv("TRN_CACHE_DIR", "0")
  assert harness.compile_fn(second_fn, w, x) == second
  harness.check(second_fn, w, x)


def test_second_script_run_again_is_served_its_own_lines_through_its_alias(cache, monkeypatch):
  rng = np.random.default_rng(0)
  w, x = rng.standard_normal((64, 32), np.float32), rng.standard_normal((16, 64), np.float32)
  harness.compile_fn(_step_from("scripts/first_script.py", 0), w, x)
  second_fn = _step_from("scripts/second_script.py", 7)
  second = harness.compile_fn(second_fn, w, x)  # re-attached: stored as its alias
  assert len(_entries(cache)) == 1 and len(_aliases(cache)) == 2
  _parse_forbidden(monkeypatch)
  assert harness.compile_fn(second_fn, w, x) == second
  lines = {op.location for op in compilation.last_report().ops if op.location}
  assert lines and all(loc.startswith("scripts/second_script.py:") for loc in lines)


def test_locations_that_do_not_map_one_to_one_are_not_guessed():
  from jax_trn import source_locations
  entry = compile_cache.Entry(b"", compilation.CompileReport(), (("a", "f.py:1:1"),
                                                                ("b", "f.py:2:1")))
  assert source_locations.reattach(entry, (("a", "g.py:1:1"),), "") is None
  entry = compile_cache.Entry(b"", compilation.CompileReport(), (("a", "f.py:1:1"),
                                                                ("a", "f.py:1:1")))
  assert source_locations.reattach(entry, (("a", "g.py:1:1"), ("a", "g.py:9:1")), "") is None
