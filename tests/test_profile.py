"""The profiler through JAX on trn: timeline recording under profile.trace(), attribution of every
instruction to its StableHLO op and this file's source lines, per-engine waits, the critical path,
the lowering of each op read from the program's debug table, and the Perfetto export."""

import json
import os
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jax_trn import _native, profile

THIS_FILE = pathlib.Path(__file__).name


def _matmul_then_elementwise(a, b):
  y = a @ b
  return jnp.tanh(y) * 2.0 + 1.0


def _inputs(device, n=256, seed=0):
  rng = np.random.default_rng(seed)
  a = jax.device_put(rng.standard_normal((n, n), dtype=np.float32), device)
  b = jax.device_put(rng.standard_normal((n, n), dtype=np.float32), device)
  return a, b


@pytest.fixture(scope="module")
def traced(trn):
  a, b = _inputs(trn)
  with profile.trace():
    jax.jit(_matmul_then_elementwise)(a, b).block_until_ready()
  return profile.last_execution(trn)


def _close(x, y):
  return abs(x - y) <= 1e-6 * max(1.0, abs(x), abs(y))


def test_trace_records_the_timeline_and_debug_table(traced):
  assert traced.timeline
  assert traced.debug and traced.target
  assert len(traced.timeline) == sum(s.instructions for s in traced.streams.values())
  for r in traced.timeline:
    assert r["start_ns"] <= r["busy_end_ns"] <= r["end_ns"] <= traced.device_time_ns + 1e-6
    assert r["index"] >= 0


def test_every_instruction_is_attributed_to_an_op_and_this_file(traced):
  for r in traced.timeline:
    entry = traced.debug_entry(r["debug_id"])
    assert entry.op.startswith(("stablehlo.", "trn.")), (r, entry)
    assert entry.name.startswith("jit(_matmul_then_elementwise)"), entry
    assert pathlib.Path(entry.line.rsplit(":", 1)[0]).name == THIS_FILE, entry
  ops = {o.op for o in traced.by_op()}
  assert {"stablehlo.dot_general", "stablehlo.tanh", "stablehlo.add"} <= ops


def test_by_op_sums_match_engine_busy_totals(traced):
  ops = traced.by_op()
  assert [o.busy_ns for o in ops] == sorted((o.busy_ns for o in ops), reverse=True)
  for name, stream in traced.streams.items():
    assert _close(sum(o.streams.get(name, 0.0) for o in ops), stream.busy_ns), name
  assert sum(o.instructions for o in ops) == len(traced.timeline)
  assert sum(o.flops for o in ops) == traced.matmul_flops > 0
  lines = traced.by_line()
  assert _close(sum(l.busy_ns for l in lines), sum(o.busy_ns for o in ops))
  assert all(pathlib.Path(l.key.rsplit(":", 1)[0]).name == THIS_FILE for l in lines)


def test_the_matmul_dominates_tensor_engine_time(traced):
  ops = traced.by_op()
  dot = next(o for o in ops if o.op == "stablehlo.dot_general")
  assert dot.streams.get("PE", 0.0) >= 0.9 * traced.engine_busy_ns("PE")
  assert max(ops, key=lambda o: o.streams.get("PE", 0.0)) is dot
  assert dot.flops == traced.matmul_flops
  assert dot.lowering == "native"  # from the program's debug table
  assert traced.debug_entry(dot.debug_ids[0]).rule == "matmul.lower_dot_general"


def test_stream_activity_and_critical_path_account_for_device_time(traced):
  activity = traced.stream_activity()
  assert set(activity) == set(traced.streams)
  for name, a in activity.items():
    assert _close(a.busy_ns, traced.streams[name].busy_ns)
    assert a.semaphore_wait_ns >= 0 and a.idle_ns >= 0
    assert a.busy_ns + a.semaphore_wait_ns <= traced.device_time_ns + 1e-6
    assert _close(sum(a.waited_on.values()), a.semaphore_wait_ns)
  # The matmul waits for its operands' DMA loads: TensorE spends time on semaphores.
  assert activity["PE"].semaphore_wait_ns > 0
  path = traced.critical_path()
  assert path and path[0].record["start_ns"] == 0
  assert _close(sum(s.contribution_ns for s in path), traced.device_time_ns)
  assert path[-1].record["end_ns"] == traced.device_time_ns


def test_report_lists_top_ops_with_source_lines(traced):
  text = traced.report(top=3)
  assert traced.format().splitlines()[0] in text
  assert "stablehlo.dot_general" in text and THIS_FILE in text
  assert "critical path" in text and "sem-wait" in text


def test_perfetto_trace_has_a_track_per_stream_and_busy_durations(traced, tmp_path):
  path = tmp_path / "trace.json"
  traced.to_perfetto(path)
  trace = json.loads(path.read_text())
  events = trace["traceEvents"]
  tracks = {e["tid"]: e["args"]["name"] for e in events
            if e["ph"] == "M" and e["name"] == "thread_name"}
  assert sorted(tracks.values()) == sorted(traced.streams)
  assert {e["pid"] for e in events} == {traced.device_id}
  durations = {}
  for e in events:
    if e["ph"] == "X":
      assert e["name"] and e["args"]["op"].startswith(("stablehlo.", "trn."))
      assert THIS_FILE in e["args"]["source"]
      durations[tracks[e["tid"]]] = durations.get(tracks[e["tid"]], 0.0) + e["dur"]
  for name, stream in traced.streams.items():
    assert abs(durations[name] * 1e3 - stream.busy_ns) <= 1e-6 * stream.busy_ns + 1e-3, name
  starts = [e for e in events if e["ph"] == "s"]
  finishes = {e["id"] for e in events if e["ph"] == "f"}
  assert starts and {e["id"] for e in starts} == finishes


def test_gpsimd_fallback_shows_in_the_report(trn):
  x = jax.device_put(np.arange(64 * 16, dtype=np.float32).reshape(64, 16)[::-1].copy(), trn)
  with profile.trace():
    jax.jit(lambda v: jnp.sort(v, axis=0) + 1.0)(x).block_until_ready()
  p = profile.last_execution(trn)
  sort = next(o for o in p.by_op() if o.op == "stablehlo.sort")
  assert sort.lowering == "gpsimd" and sort.streams.get("POOL", 0) > 0
  assert "GpSimd fallbacks: 1 ops" in p.report()


def test_timeline_is_off_by_default(trn):
  if os.environ.get("TRN_PROFILE", "0") not in ("", "0"):
    pytest.skip("TRN_PROFILE is set in this environment")
  assert not _native.record_timeline()
  a, b = _inputs(trn, 128)
  jax.jit(_matmul_then_elementwise)(a, b).block_until_ready()
  p = profile.last_execution(trn)
  assert p.timeline == [] and p.device_time_ns > 0 and p.streams
  assert p.debug  # the debug table is shared with the program, not copied: always there
  with pytest.raises(ValueError, match="trace"):
    p.by_op()
  assert "no timeline" in p.report()


def test_trace_nests_and_turns_off_after_an_error():
  with pytest.raises(RuntimeError):
    with profile.trace():
      with profile.trace():
        assert _native.record_timeline()
      assert _native.record_timeline()
      raise RuntimeError("boom")
  if os.environ.get("TRN_PROFILE", "0") in ("", "0"):
    assert not _native.record_timeline()


def test_last_execution_is_kept_per_device(tmp_path):
  devices = jax.devices("trn")
  if len(devices) < 2:
    pytest.skip("needs two trn devices")
  first, second = devices[:2]
  with profile.trace():
    jax.jit(_matmul_then_elementwise)(*_inputs(first, 256)).block_until_ready()
    jax.jit(lambda v: jnp.exp(v) - 1.0)(_inputs(second, 64)[0]).block_until_ready()
  p0, p1 = profile.last_execution(first), profile.last_execution(second)
  assert (p0.device_id, p1.device_id) == (first.id, second.id)
  assert p0.matmul_flops > 0 and p1.matmul_flops == 0
  assert "stablehlo.dot_general" in {p0.debug_entry(r["debug_id"]).op for r in p0.timeline}
  ops1 = {p1.debug_entry(r["debug_id"]).op for r in p1.timeline}
  assert "stablehlo.exponential" in ops1 and "stablehlo.dot_general" not in ops1
  path = tmp_path / "both.json"
  profile.write_perfetto(path, [p0, p1])  # several devices in one trace: one process each
  events = json.loads(path.read_text())["traceEvents"]
  assert {e["pid"] for e in events} == {first.id, second.id}


def test_control_flow_blocks_keep_the_accounting(trn):
  def loop(x, n):
    return jax.lax.while_loop(lambda c: c[1] < n, lambda c: (jnp.tanh(c[0]) * 2.0, c[1] + 1),
                              (x, 0))[0]
  x = jax.device_put(np.ones((128, 128), np.float32), trn)
  with profile.trace():
    jax.jit(loop)(x, 3).block_until_ready()
  p = profile.last_execution(trn)
  ops = p.by_op()
  for name, stream in p.streams.items():
    assert _close(sum(o.streams.get(name, 0.0) for o in ops), stream.busy_ns), name
  assert _close(sum(s.contribution_ns for s in p.critical_path()), p.device_time_ns)
  assert any(o.op == "stablehlo.while" for o in ops)


def _signature(raw: dict) -> tuple:
  """What identifies one whole execution's profile: per-stream instruction counts, the timeline
  length, and the StableHLO ops its instructions come from."""
  streams = tuple(sorted((name, s["instructions"]) for name, s in raw["streams"].items()))
  ops = frozenset(raw["debug"][r["debug_id"]]["op"] for r in raw["timeline"])
  return streams, len(raw["timeline"]), ops


def test_concurrent_executions_never_mix_profiles(trn):
  """Two threads run two different programs on one device; every profile read meanwhile is one
  whole execution of one of them (profiles are immutable once published, never overwritten)."""
  import threading

  x = jax.device_put(np.linspace(-1, 1, 128 * 64, dtype=np.float32).reshape(128, 64), trn)
  programs = [jax.jit(lambda v: jnp.tanh(v) * 2.0), jax.jit(lambda v: (v @ v.T).sum(axis=1))]
  signatures = set()
  with profile.trace():
    for f in programs:
      f(x).block_until_ready()
      signatures.add(_signature(_native.last_execution(trn.id)))
    assert len(signatures) == 2
    errors = []

    def run(f):
      try:
        for _ in range(40):
          f(x).block_until_ready()
      except Exception as e:  # noqa: BLE001 (reported below)
        errors.append(e)

    threads = [threading.Thread(target=run, args=(f,)) for f in programs]
    for t in threads:
      t.start()
    reads = 0
    while any(t.is_alive() for t in threads) or not reads:
      assert _signature(_native.last_execution(trn.id)) in signatures
      reads += 1
    for t in threads:
      t.join()
  assert not errors and reads > 1


def test_a_second_client_does_not_hide_the_last_execution(trn):
  """Clients share the process (JAX's, torch_xla's, a tool's): last_execution(device) is the
  execution on that device that completed last, whichever client ran it."""
  from pypjrt._loader import Plugin
  from pypjrt.client import Client
  from jax_trn import plugin as trn_plugin
  jax.jit(lambda v: jnp.exp(v) - 1.0)(_inputs(trn, 64)[0]).block_until_ready()
  ran = profile.last_execution(trn)
  loader = Plugin(str(trn_plugin.library_path()))
  loader.initialize()
  other = Client(loader, options={})
  try:
    after = profile.last_execution(trn)
    assert after is not None and after.device_time_ns == ran.device_time_ns
    assert after.matmul_flops == ran.matmul_flops
  finally:
    other.close()
