"""jax.profiler.trace / start_trace capture trn executions: the .xplane.pb JAX writes holds a plane
per trn device with a line per engine and DMA queue, an event per executed instruction (named
after its op, with its opcode, StableHLO op, source line and modeled busy time) and a line of
executions, placed on the host clock where the device started each one. The file is read twice:
by JAX's own reader (jax.profiler.ProfileData) and by a decoder of the XSpace wire format here,
and compared with jax_trn.profile's view of the same execution. torch_xla's start_trace /
stop_trace reach the same plugin profiler (slow: a fresh process with torch)."""

import gzip
import importlib.util
import json
import pathlib
import textwrap
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fresh_process import run_python
from jax_trn import _native, profile

THIS_FILE = pathlib.Path(__file__).name
_PS = 1e-3  # ns: the trace's resolution


def _matmul_then_elementwise(a, b):
  y = a @ b
  return jnp.tanh(y) * 2.0 + 1.0


def _inputs(device, n=256, seed=0):
  rng = np.random.default_rng(seed)
  return tuple(jax.device_put(rng.standard_normal((n, n), dtype=np.float32), device)
               for _ in range(2))


# --- the XSpace wire format (tsl/profiler/protobuf/xplane.proto), decoded by hand --------------

def _varint(data: bytes, pos: int) -> tuple[int, int]:
  value = shift = 0
  while True:
    byte = data[pos]
    pos += 1
    value |= (byte & 0x7F) << shift
    shift += 7
    if byte < 0x80:
      return value, pos


def _fields(data: bytes) -> list[tuple[int, object]]:
  """(field number, int or bytes) for each field of one message."""
  fields, pos = [], 0
  while pos < len(data):
    key, pos = _varint(data, pos)
    number, wire_type = key >> 3, key & 7
    if wire_type == 0:
      value, pos = _varint(data, pos)
    elif wire_type == 2:
      size, pos = _varint(data, pos)
      value, pos = data[pos:pos + size], pos + size
    else:
      raise AssertionError(f"unexpected wire type {wire_type} for field {number}")
    fields.append((number, value))
  return fields


def _one(fields, number, default=None):
  return next((v for n, v in fields if n == number), default)


def _stats(stat_messages, stat_names) -> dict:
  out = {}
  for message in stat_messages:
    f = _fields(message)
    name = stat_names[_one(f, 1)]
    out[name] = _one(f, 5).decode() if _one(f, 5) is not None else _one(f, 4)
  return out


def _decode_plane(plane: bytes) -> dict:
  """{"name", "stats", "lines": {line name: [event dict]}} of one XPlane."""
  f = _fields(plane)
  stat_names = {}
  for entry in (v for n, v in f if n == 5):
    meta = _fields(_one(_fields(entry), 2))
    stat_names[_one(meta, 1)] = _one(meta, 2).decode()
  metadata = {}
  for entry in (v for n, v in f if n == 4):
    meta = _fields(_one(_fields(entry), 2))
    metadata[_one(meta, 1)] = (_one(meta, 2).decode(),
                               _stats([v for n, v in meta if n == 5], stat_names))
  lines = {}
  for line in (_fields(v) for n, v in f if n == 3):
    events = []
    for event in (_fields(v) for n, v in line if n == 4):
      name, meta_stats = metadata[_one(event, 1)]
      events.append({"name": name, "offset_ps": _one(event, 2, 0),
                     "duration_ps": _one(event, 3, 0), "timestamp_ns": _one(line, 3, 0),
                     **meta_stats, **_stats([v for n, v in event if n == 4], stat_names)})
    lines[_one(line, 2).decode()] = sorted(events, key=lambda e: e["offset_ps"])
  return {"name": _one(f, 2).decode(), "stats": _stats([v for n, v in f if n == 6], stat_names),
          "lines": lines}


class Trace:
  """The one trace jax.profiler wrote under `log_dir`."""

  def __init__(self, log_dir: pathlib.Path):
    (path,) = log_dir.glob("plugins/profile/*/*.xplane.pb")
    self.path = path
    self.data = jax.profiler.ProfileData.from_file(str(path))
    self.planes = {}
    for number, plane in _fields(path.read_bytes()):
      if number == 1:
        decoded = _decode_plane(plane)
        self.planes[decoded["name"]] = decoded

  def device(self, device_id: int) -> dict:
    name = f"/device:CUSTOM:{device_id}"
    assert name in self.planes, list(self.planes)
    assert self.data.find_plane_with_name(name) is not None  # JAX's reader finds it too
    return self.planes[name]

  def profile_start_ns(self) -> int:
    """The host clock at the start of the trace: JAX's file counts times from it."""
    return dict(self.data.find_plane_with_name("Task Environment").stats)["profile_start_time"]


@pytest.fixture(scope="module")
def traced(trn, tmp_path_factory):
  """One jitted call traced by jax.profiler.trace, with jax_trn's profile of the same run."""
  log_dir = tmp_path_factory.mktemp("jax_trace")
  f = jax.jit(_matmul_then_elementwise)
  a, b = _inputs(trn)
  f(a, b).block_until_ready()  # compiled outside the trace
  with jax.profiler.trace(str(log_dir)):
    before = time.time_ns()
    f(a, b).block_until_ready()
    after = time.time_ns()
  return Trace(log_dir), profile.last_execution(trn), before, after


def test_the_trace_has_a_plane_for_the_trn_device_with_a_line_per_engine_and_dma_queue(traced):
  trace, p, _, _ = traced
  plane = trace.device(0)
  lines = plane["lines"]
  assert list(lines) == [name for name, _ in p.tracks()] + ["Executions"]
  assert {"PE", "ACT"} <= set(lines) and any(name.startswith("DMA") for name in lines)
  for name, records in p.tracks():
    assert len(lines[name]) == len(records), name
  assert plane["stats"]["device"] == "TRN_0" and plane["stats"]["target"] == p.target
  jax_lines = {line.name: len(list(line.events))
               for line in trace.data.find_plane_with_name("/device:CUSTOM:0").lines}
  assert jax_lines == {name: len(events) for name, events in lines.items()}


def test_each_event_is_an_instruction_named_after_its_op_with_its_source_line_and_busy_time(traced):
  trace, p, _, _ = traced
  lines = trace.device(0)["lines"]
  (execution,) = lines["Executions"]
  for name, records in p.tracks():
    for event, r in zip(lines[name], records):
      entry = p.debug_entry(r["debug_id"])
      assert event["name"] == entry.name and event["name"].startswith("jit(_matmul_then_elementwise)")
      assert event["opcode"] == r["opcode"]
      assert event["stablehlo_op"] == entry.op
      assert event["source"] == entry.location
      assert pathlib.Path(entry.line.rsplit(":", 1)[0]).name == THIS_FILE
      assert abs((event["offset_ps"] - execution["offset_ps"]) / 1e3 - r["start_ns"]) <= 2 * _PS
      assert abs(event["duration_ps"] / 1e3 - (r["busy_end_ns"] - r["start_ns"])) <= 2 * _PS
      assert event.get("bytes", 0) == r["bytes"] and event.get("flops", 0) == r["flops"]
      assert event.get("hbm_bytes", 0) == r["hbm_bytes"]
  ops = {e["stablehlo_op"] for name, events in lines.items() if name != "Executions" for e in events}
  assert {"stablehlo.dot_general", "stablehlo.tanh"} <= ops


def test_the_execution_starts_at_its_host_start_time_and_lasts_its_device_time(traced):
  trace, p, before, after = traced
  (execution,) = trace.device(0)["lines"]["Executions"]
  assert execution["name"] == "jit__matmul_then_elementwise"
  assert before <= execution["host_start_ns"] <= after
  # Placed where the device started it: on the trace's axis (from the profile's start) too.
  start_ns = trace.profile_start_ns() + execution["timestamp_ns"] + execution["offset_ps"] / 1e3
  assert abs(start_ns - execution["host_start_ns"]) <= 1
  assert abs(execution["duration_ps"] / 1e3 - p.device_time_ns) <= 2 * _PS
  assert execution["matmul_flops"] == p.matmul_flops and execution["hbm_bytes"] == p.hbm_bytes


def test_the_perfetto_trace_jax_writes_has_a_track_per_engine_with_the_ops(traced):
  trace, p, _, _ = traced
  (trace_json,) = trace.path.parent.glob("*.trace.json.gz")
  events = json.loads(gzip.decompress(trace_json.read_bytes()))["traceEvents"]
  (pid,) = {e["pid"] for e in events
            if e.get("name") == "process_name" and e["args"]["name"] == "/device:CUSTOM:0"}
  threads = {e["tid"]: e["args"]["name"] for e in events
             if e.get("name") == "thread_name" and e["pid"] == pid}
  assert [threads[t].split(" ")[0] for t in sorted(threads)] == (
      [name for name, _ in p.tracks()] + ["Executions"])
  dots = [e for e in events if e.get("ph") == "X" and e["pid"] == pid
          and e["name"].endswith("/dot_general")]
  assert dots and all(e["args"]["source"].rsplit(":", 2)[0].endswith(THIS_FILE) for e in dots)


def test_start_and_stop_trace_capture_every_device_and_its_executions_never_overlap(tmp_path):
  devices = jax.devices("trn")[:2]
  f = jax.jit(_matmul_then_elementwise)
  inputs = [_inputs(d) for d in devices]
  for a, b in inputs:
    f(a, b).block_until_ready()
  jax.profiler.start_trace(str(tmp_path))
  try:
    results = [f(a, b) for a, b in inputs for _ in range(3)]  # queued, awaited together
    jax.block_until_ready(results)
  finally:
    jax.profiler.stop_trace()
  trace = Trace(tmp_path)
  for device in devices:
    plane = trace.device(device.id)
    assert plane["stats"]["device"] == f"TRN_{device.id}"
    executions = plane["lines"]["Executions"]
    assert len(executions) == 3
    for earlier, later in zip(executions, executions[1:]):
      # One program at a time per device: the next starts no earlier than this one's end.
      assert later["offset_ps"] >= earlier["offset_ps"] + earlier["duration_ps"]
      assert later["offset_ps"] / 1e3 >= later["host_start_ns"] - executions[0]["host_start_ns"] - 1


def test_the_timeline_is_recorded_only_while_the_trace_runs(trn, tmp_path):
  if _native.record_timeline():
    pytest.skip("TRN_PROFILE is set: the timeline is recorded anyway")
  with jax.profiler.trace(str(tmp_path)):
    assert _native.record_timeline()
  assert not _native.record_timeline()
  a, b = _inputs(trn)
  jax.jit(_matmul_then_elementwise)(a, b).block_until_ready()
  assert not profile.last_execution(trn).timeline


_TORCH_CHILD = textwrap.dedent("""
    import json, pathlib
    from importlib import metadata
    import torch, torch_xla
    if not any(ep.name == "trn" for ep in metadata.entry_points(group="torch_xla.plugins")):
      from torch_xla.experimental import plugins
      from jax_trn.torch_plugin import TrnPlugin
      plugins.register_plugin("TRN", TrnPlugin())
    import torch_xla.debug.profiler as xp
    import jax

    dev = torch_xla.device()
    x = torch.randn(64, 64).to(dev)
    (x @ x + 1).cpu()  # compiled outside the trace
    log_dir = pathlib.Path("LOG_DIR")
    xp.start_trace(str(log_dir))
    (x @ x + 1).cpu()
    xp.stop_trace()
    (path,) = log_dir.glob("plugins/profile/*/*.xplane.pb")
    plane = jax.profiler.ProfileData.from_file(str(path)).find_plane_with_name("/device:CUSTOM:0")
    print(json.dumps({line.name: [e.name for e in line.events] for line in plane.lines}))
""")


@pytest.mark.slow  # starts torch in a fresh process
def test_torch_xla_start_trace_captures_trn_executions_too(tmp_path):
  if importlib.util.find_spec("torch_xla") is None:
    pytest.skip("torch_xla is not installed (pip install '.[torch]')")
  result = run_python(_TORCH_CHILD.replace("LOG_DIR", str(tmp_path)), {"PJRT_DEVICE": "TRN"},
                      timeout=600)
  assert result.returncode == 0, result.stderr[-4000:]
  lines = json.loads(result.stdout.strip().splitlines()[-1])
  assert "PE" in lines and any(name.startswith("DMA") for name in lines)
  (execution,) = lines["Executions"]
  assert execution.startswith("SyncTensorsGraph"), execution  # torch_xla's module name
  assert all(name.startswith("dot") for name in lines["PE"]), lines["PE"]  # HLO op names
