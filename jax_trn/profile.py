"""Where the modeled device time of an execution goes: per engine, per op, per source line.

Every execution records what the timing model charged (shared/design/neuroncore.md): total device
time, and for each engine and DMA queue its busy time and instruction count. That much is always
kept and costs nothing. Inside `trace()` (or with TRN_PROFILE=1) the runtime also keeps the
per-instruction timeline; with the program's debug table (instruction -> StableHLO op -> JAX name
-> user source line) the profile can then say which op and which line the time went to
(`by_op`, `by_line`), why an engine sat idle (`stream_activity`), what chain of instructions set
the device time (`critical_path`), and write a trace for https://ui.perfetto.dev (`to_perfetto`).

All times are the timing model's estimates (est.), not hardware measurements: docs/profiling.md.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import os

from jax_trn import _native, config, profile_advice, profile_collectives, profile_html, roofline

ENGINES = ("PE", "ACT", "DVE", "POOL", "SP")
_EPS_NS = 1e-6

# Perfetto track order: engines first (as AWS's profiler lists them), then the DMA queues.
_TRACK_ORDER = {name: i for i, name in enumerate(("PE", "ACT", "DVE", "POOL", "SP"))}


@dataclasses.dataclass(frozen=True)
class StreamTime:
  busy_ns: float
  instructions: int


@dataclasses.dataclass(frozen=True)
class DebugEntry:
  op: str            # "stablehlo.dot_general"
  name: str          # "jit(f)/dot_general"
  location: str      # "file.py:36:15" (may be empty)
  lowering: str = ""  # "native", "gpsimd", "fused" (natively inside a trn.fusion), "empty", ""
  rule: str = ""      # the compiler's lowering rule ("matmul.lower_dot_general"), may be empty

  @property
  def line(self) -> str:
    """"file.py:36": the location without its column."""
    return _line_of(self.location)


@dataclasses.dataclass
class OpTime:
  """The instructions of one StableHLO op instance (or of one source line, from by_line)."""
  key: str                        # "jit(f)/dot_general" for an op; "file.py:36" for a line
  op: str                         # "stablehlo.dot_general"; for a line, its ops joined by ", "
  location: str                   # the user's source line ("file.py:36"), may be empty
  busy_ns: float = 0.0            # engine and DMA queue busy time, summed over streams
  streams: dict[str, float] = dataclasses.field(default_factory=dict)  # busy per stream
  instructions: int = 0
  bytes: int = 0                  # moved (DMA) or touched (compute engines)
  flops: int = 0                  # matmul FLOPs (2*M*N*K)
  lowering: str = ""              # "native", "gpsimd", "fused" or "" (unknown): the debug table's
  debug_ids: list[int] = dataclasses.field(default_factory=list)
  hbm_bytes: int = 0              # read from and written to HBM
  fp8_flops: int = 0              # the part of `flops` that ran at the fp8 rate
  transpose_flops: int = 0        # TensorE transposes (HFU counts them, MFU does not)
  active_ns: float = 0.0          # time at least one of its instructions ran (the MFU/MBU time)
  dma_active_ns: float = 0.0      # time at least one of its DMA transfers was in flight
  # Time its instructions sat ready waiting on another op's instructions, by their stream
  # ("DMA" for any queue; "block barrier"): the union over its streams.
  waited_on: dict[str, float] = dataclasses.field(default_factory=dict)
  utilization: roofline.Utilization = roofline.Utilization(0.0, 0.0, 0.0)  # over active_ns
  bottleneck: str = ""            # "TensorE-bound", "DMA-bound", "waiting on DMA", ...
  why: str = ""                   # the figures behind `bottleneck`

  @property
  def engine(self) -> str:
    """The stream this op spent most of its time on."""
    return max(self.streams, key=self.streams.get) if self.streams else ""


@dataclasses.dataclass(frozen=True)
class StreamActivity:
  """How one engine or DMA queue spent the device time."""
  busy_ns: float
  semaphore_wait_ns: float          # idle with its next instruction waiting on another stream
  idle_ns: float                    # idle with nothing to do (before its first wait / after its last)
  waited_on: dict[str, float]       # semaphore wait time by the stream it waited for


@dataclasses.dataclass(frozen=True)
class CriticalStep:
  """One instruction on the chain that sets the device time."""
  record: dict                      # the timeline record
  contribution_ns: float            # device time this step accounts for
  reason: str                       # why the next step waited for it: "stream order" / "semaphore"


def _union_ns(intervals: list[tuple[float, float]]) -> float:
  """The length of the union of [start, end) intervals."""
  total, reach = 0.0, float("-inf")
  for start, end in sorted(intervals):
    if end > reach:
      total += end - max(start, reach)
      reach = end
  return total


def _wait_stream(stream: str) -> str:
  """DMA queues are one resource for an op's waits; engines and "block barrier" stay."""
  return "DMA" if stream.startswith("DMA") else stream


def _line_of(location: str) -> str:
  parts = location.rsplit(":", 2)
  if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
    return parts[0] + ":" + parts[1]
  return location


def _busy_ns(record: dict) -> float:
  return record.get("busy_end_ns", record["end_ns"]) - record["start_ns"]


def _track_key(stream: str) -> tuple[int, int, int]:
  """Core 0's tracks, then core 1's ("PE@1": an LNC=2 program's second physical core), each
  engines first, then DMA queues in order."""
  name, _, core = stream.partition("@")
  core = int(core) if core.isdigit() else 0
  if name in _TRACK_ORDER:
    return (core, 0, _TRACK_ORDER[name])
  if name.startswith("DMA") and name[3:].isdigit():
    return (core, 1, int(name[3:]))
  return (core, 2, 0)


@dataclasses.dataclass(frozen=True)
class ExecutionProfile:
  device_id: int
  device_time_ns: float
  matmul_flops: int
  streams: dict[str, StreamTime]
  timeline: list[dict]
  debug: tuple[DebugEntry, ...] = ()
  target: str = ""
  fp8_matmul_flops: int = 0      # the part of matmul_flops that ran at the fp8 rate
  transpose_flops: int = 0       # TensorE transposes' FLOPs
  hbm_bytes: int = 0             # read from and written to HBM
  physical_cores: int = 1        # NeuronCores of the device (its LNC): the peak's

  # --- the always-on summary ---------------------------------------------------------------

  def engine_busy_ns(self, stream: str) -> float:
    entry = self.streams.get(stream)
    return entry.busy_ns if entry else 0.0

  @property
  def dma_busy_ns(self) -> float:
    """Busy time of the busiest DMA queue."""
    return max((t.busy_ns for name, t in self.streams.items() if name.startswith("DMA")),
               default=0.0)

  def utilization(self, stream: str) -> float:
    if self.device_time_ns <= 0:
      return 0.0
    return self.engine_busy_ns(stream) / self.device_time_ns

  def tensor_engine_utilization(self, peak_flops_per_ns: float) -> float:
    """Achieved matmul FLOP rate over the TensorE peak for the inputs' dtype."""
    if self.device_time_ns <= 0 or peak_flops_per_ns <= 0:
      return 0.0
    return self.matmul_flops / self.device_time_ns / peak_flops_per_ns

  def peak(self) -> roofline.DevicePeak:
    """The device's peak (TensorE bf16 FLOPs and HBM bandwidth of its physical cores)."""
    cached = self.__dict__.get("_peak_cache")
    if cached is None:
      cached = roofline.device_peak(self.target or "trn2", self.physical_cores)
      object.__setattr__(self, "_peak_cache", cached)
    return cached

  def device_utilization(self) -> roofline.Utilization:
    """MFU, HFU and MBU of the whole execution against the device's peak (always available)."""
    return roofline.utilization(self.peak(), self.device_time_ns, self.matmul_flops,
                                self.fp8_matmul_flops, self.transpose_flops, self.hbm_bytes)

  def format(self) -> str:
    """MFU/HFU/MBU, one line per engine, and one for the DMA queues together."""
    peak = self.peak()
    lines = [f"device {self.device_id}: modeled device time {self.device_time_ns / 1e3:.2f} us",
             f"  {self.device_utilization().format()}  (peak of the device: "
             f"{peak.physical_cores} {self.target or 'trn2'} core(s), {peak.tflops:.1f} bf16 "
             f"TFLOPS, {peak.hbm_bytes_per_ns:.0f} GB/s HBM)",
             f"  HBM traffic {self.hbm_bytes / 1e6:.3f} MB, TensorE {self.matmul_flops / 1e9:.3f} "
             f"GFLOP matmul + {self.transpose_flops / 1e9:.3f} GFLOP transposes"]
    for name in ENGINES + tuple(f"{e}@1" for e in ENGINES):  # "@1": the second physical core
      entry = self.streams.get(name)
      if entry and entry.instructions:
        lines.append(f"  {name:<5} busy {entry.busy_ns / 1e3:10.2f} us ({100 * self.utilization(name):5.1f} %)"
                     f"  {entry.instructions} instructions")
    queues = [t for name, t in self.streams.items() if name.startswith("DMA") and t.instructions]
    if queues:
      lines.append(f"  DMA   busiest queue {self.dma_busy_ns / 1e3:7.2f} us "
                   f"({100 * self.dma_busy_ns / max(self.device_time_ns, 1e-9):5.1f} %)  "
                   f"{sum(t.instructions for t in queues)} transfers on {len(queues)} queues")
    return "\n".join(lines)

  # --- attribution (needs the timeline) ----------------------------------------------------

  def _require_timeline(self) -> None:
    if not self.timeline:
      raise ValueError(
          f"the last execution on device {self.device_id} kept no timeline: run it inside "
          "jax_trn.profile.trace() (or with TRN_PROFILE=1) to attribute time to ops and lines")

  def debug_entry(self, debug_id: int) -> DebugEntry:
    if 0 <= debug_id < len(self.debug):
      return self.debug[debug_id]
    return DebugEntry("", "", "")

  def _records_by_debug_id(self) -> dict[int, list[dict]]:
    groups: dict[int, list[dict]] = collections.defaultdict(list)
    for r in self.timeline:
      groups[r["debug_id"]].append(r)
    return groups

  def _op_time(self, entry: OpTime, records: list[dict]) -> OpTime:
    """Fills `entry` from its instructions' records: sums, active time, waits, utilization
    and bottleneck."""
    waits = self._waits()
    own = set(entry.debug_ids)
    waiting: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)
    for r in records:
      _add(entry, r)
      gap, producer = waits.get(id(r), (0.0, None))
      # Waiting on its own instructions (an engine on the op's loads) is its pipeline, not a
      # wait on another op: that shows as the resource it held.
      if gap > 0 and (producer is None or producer["debug_id"] not in own):
        key = _wait_stream(producer["stream"]) if producer else "block barrier"
        waiting[key].append((r["start_ns"] - gap, r["start_ns"]))
    entry.waited_on = {key: _union_ns(spans) for key, spans in waiting.items()}
    waited_ns = _union_ns([span for spans in waiting.values() for span in spans])
    entry.active_ns = _union_ns([(r["start_ns"], r.get("busy_end_ns", r["end_ns"]))
                                 for r in records])
    entry.dma_active_ns = _union_ns([(r["start_ns"], r["end_ns"]) for r in records
                                     if r["stream"].startswith("DMA")])
    entry.utilization = roofline.utilization(self.peak(), entry.active_ns, entry.flops,
                                             entry.fp8_flops, entry.transpose_flops,
                                             entry.hbm_bytes)
    held = {s: ns for s, ns in entry.streams.items() if not s.startswith("DMA")}
    if entry.dma_active_ns > 0:
      held["DMA"] = entry.dma_active_ns
    dma_bytes = sum(r["bytes"] for r in records if r["stream"].startswith("DMA"))
    dma_fraction = (dma_bytes / entry.dma_active_ns / self.peak().dma_bytes_per_ns_per_core
                    if entry.dma_active_ns > 0 else 0.0)
    entry.bottleneck, entry.why = roofline.bottleneck(entry.lowering, held, entry.waited_on,
                                                      waited_ns, entry.utilization.mbu,
                                                      dma_fraction)
    return entry

  def by_op(self) -> list[OpTime]:
    """Busy time per StableHLO op instance (one entry per debug-table entry that ran
    instructions), with its MFU/HFU/MBU over its active time and its bottleneck, most expensive
    first. Summed over ops, each stream's busy time equals `streams[name].busy_ns`, the FLOPs
    equal `matmul_flops` and the HBM bytes `hbm_bytes`."""
    self._require_timeline()
    lowering = self.lowerings()
    ops = []
    for debug_id, records in self._records_by_debug_id().items():
      d = self.debug_entry(debug_id)
      ops.append(self._op_time(OpTime(d.name or d.op or f"debug {debug_id}", d.op, d.line,
                                      lowering=lowering.get(debug_id, ""),
                                      debug_ids=[debug_id]), records))
    return sorted(ops, key=lambda o: -o.busy_ns)

  def by_line(self) -> list[OpTime]:
    """Busy time per user source line ("file.py:36"), most expensive first."""
    groups = self._records_by_debug_id()
    lines: dict[str, tuple[OpTime, list[dict]]] = {}
    for op in self.by_op():
      key = op.location or "(no source line)"
      entry, records = lines.setdefault(key, (OpTime(key, "", op.location), []))
      names = entry.op.split(", ") if entry.op else []
      if op.key not in names:
        entry.op = ", ".join(names + [op.key])
      entry.debug_ids += op.debug_ids
      for debug_id in op.debug_ids:
        records += groups[debug_id]
      if op.lowering == "gpsimd":
        entry.lowering = "gpsimd"
      elif op.lowering and not entry.lowering:
        entry.lowering = op.lowering
    return sorted((self._op_time(entry, records) for entry, records in lines.values()),
                  key=lambda o: -o.busy_ns)

  def lowerings(self) -> dict[int, str]:
    """debug_id -> how the compiler lowered that op ("native", "gpsimd", "fused": natively
    inside a trn.fusion, "empty"), as the program's debug table records it; entries that are no
    op's (and programs of format version < 3) are left out."""
    return {debug_id: d.lowering for debug_id, d in enumerate(self.debug) if d.lowering}

  # --- waits and the critical path ---------------------------------------------------------

  def _segments(self) -> list[int]:
    """For each timeline record, which block entry it ran in: semaphore counts restart at every
    block entry (control flow), and a block ends with its SP control record (index -1)."""
    segments, current = [], 0
    for r in self.timeline:
      segments.append(current)
      if r.get("index", 0) < 0 and r["stream"] == "SP":
        current += 1
    return segments

  def _by_stream(self) -> dict[str, list[dict]]:
    streams: dict[str, list[dict]] = collections.defaultdict(list)
    for r in self.timeline:
      streams[r["stream"]].append(r)
    for records in streams.values():
      records.sort(key=lambda r: r["start_ns"])
    return streams

  def tracks(self) -> list[tuple[str, list[dict]]]:
    """(stream, its records by start time) per engine and DMA queue, in the order AWS's
    profiler lists them: engines, then the DMA queues."""
    return sorted(self._by_stream().items(), key=lambda kv: _track_key(kv[0]))

  def _done_times(self, streams: dict[str, list[dict]]) -> dict[tuple, dict]:
    """(block entry, stream, count) -> the record whose completion makes sem[stream] reach
    count in that block entry: the count-th instruction the stream executed there (a stream
    executes in order; in a counted loop one stored instruction runs once per iteration)."""
    done, executed = {}, collections.Counter()
    for r, segment in zip(self.timeline, self._segments()):
      if r.get("index", -1) >= 0:
        executed[(segment, r["stream"])] += 1
        done[(segment, r["stream"], executed[(segment, r["stream"])])] = r
    return done

  def _binding_wait(self, record: dict, done: dict) -> dict | None:
    """The instruction whose completion released `record` (its latest-completing wait)."""
    segment = self._segment_of[id(record)]
    best = None
    for stream, count in record.get("waits", ()):
      producer = done.get((segment, stream, count))
      if producer is not None and (best is None or producer["end_ns"] > best["end_ns"]):
        best = producer
    return best

  @property
  def _segment_of(self) -> dict[int, int]:
    cached = self.__dict__.get("_segment_cache")
    if cached is None or len(cached) != len(self.timeline):
      cached = {id(r): s for r, s in zip(self.timeline, self._segments())}
      object.__setattr__(self, "_segment_cache", cached)
    return cached

  def _waits(self) -> dict[int, tuple[float, dict | None]]:
    """id(record) -> (how long it sat ready in its stream's order waiting on a semaphore, the
    record that released it or None for the block barrier), for the records that waited."""
    cached = self.__dict__.get("_wait_cache")
    if cached is not None:
      return cached
    streams = self._by_stream()
    done = self._done_times(streams)
    waits = {}
    for records in streams.values():
      free = 0.0
      for r in records:
        gap = r["start_ns"] - free
        if gap > _EPS_NS:
          waits[id(r)] = (gap, self._binding_wait(r, done))
        free = max(free, r.get("busy_end_ns", r["end_ns"]))
    object.__setattr__(self, "_wait_cache", waits)
    return waits

  def stream_activity(self) -> dict[str, StreamActivity]:
    """Per engine and DMA queue: busy, waiting on a semaphore (its next instruction was ready in
    program order but waited for another stream), and idle with nothing to do."""
    self._require_timeline()
    streams = self._by_stream()
    waits = self._waits()
    out = {}
    for name in sorted(streams, key=_track_key):
      busy = wait = 0.0
      waited_on: dict[str, float] = collections.defaultdict(float)
      for r in streams[name]:
        busy += _busy_ns(r)
        if id(r) in waits:
          gap, producer = waits[id(r)]
          wait += gap
          waited_on[producer["stream"] if producer else "block barrier"] += gap
      idle = max(0.0, self.device_time_ns - busy - wait)
      out[name] = StreamActivity(busy, wait, idle, dict(waited_on))
    return out

  def critical_path(self) -> list[CriticalStep]:
    """The chain of instructions that sets the device time, first to last: from the instruction
    that completes last, back through whichever of (the previous instruction of its stream, the
    instruction it waited on) released it later. The contributions sum to the device time."""
    self._require_timeline()
    streams = self._by_stream()
    done = self._done_times(streams)
    previous = {}
    for records in streams.values():
      for before, after in zip(records, records[1:]):
        previous[id(after)] = before
    segment_of = self._segment_of
    exits = {segment_of[id(r)]: r for r in self.timeline if r.get("index", 0) < 0}
    last_of_segment: dict[int, dict] = {}
    for r in self.timeline:
      if r.get("index", 0) >= 0:
        seg = segment_of[id(r)]
        best = last_of_segment.get(seg)
        if best is None or r["end_ns"] > best["end_ns"]:
          last_of_segment[seg] = r
    current = max(self.timeline, key=lambda r: r["end_ns"])
    path = [(current, current["end_ns"] - current["start_ns"], "last to complete")]
    while current["start_ns"] > _EPS_NS:
      seg = segment_of[id(current)]
      candidates = []  # (release time, predecessor, reason)
      if current.get("index", 0) < 0:  # a block exit starts when its block has finished
        if seg in last_of_segment:
          candidates.append((last_of_segment[seg]["end_ns"], last_of_segment[seg], "block end"))
      else:
        before = previous.get(id(current))
        if before is not None and segment_of[id(before)] == seg:
          candidates.append((before.get("busy_end_ns", before["end_ns"]), before, "stream order"))
        producer = self._binding_wait(current, done)
        if producer is not None:
          candidates.append((producer["end_ns"], producer, "semaphore"))
        if seg - 1 in exits:
          candidates.append((exits[seg - 1]["end_ns"], exits[seg - 1], "block entry"))
      candidates = [c for c in candidates if c[1]["start_ns"] < current["start_ns"] + _EPS_NS
                    and c[1] is not current]
      if not candidates:
        break
      _, step, reason = max(candidates, key=lambda c: c[0])
      path.append((step, current["start_ns"] - step["start_ns"], reason))
      current = step
    return [CriticalStep(r, ns, reason) for r, ns, reason in reversed(path)]

  # --- reports -----------------------------------------------------------------------------

  def report(self, top: int = 10) -> str:
    """The summary, then how each engine spent its time, the `top` ops and source lines by
    busy time (with their lowering: GpSimd fallbacks are the usual surprise), and the critical
    path by stream. All times are the timing model's estimates."""
    lines = [self.format() + "   (est.: timing model, not a measurement)"]
    if not self.timeline:
      lines.append("  no timeline: run inside jax_trn.profile.trace() or with TRN_PROFILE=1 for "
                   "per-op and per-line attribution")
      return "\n".join(lines)
    total = max(self.device_time_ns, 1e-9)
    all_busy = max(sum(t.busy_ns for t in self.streams.values()), 1e-9)
    lines.append("  stream  busy us  sem-wait us  idle us   waited on")
    for name, a in self.stream_activity().items():
      waited = ", ".join(f"{s} {ns / 1e3:.2f}" for s, ns in
                         sorted(a.waited_on.items(), key=lambda kv: -kv[1])[:3])
      lines.append(f"  {name:<6}{a.busy_ns / 1e3:9.2f}{a.semaphore_wait_ns / 1e3:13.2f}"
                   f"{a.idle_ns / 1e3:9.2f}   {waited}")
    for title, rows in (("ops", self.by_op()), ("source lines", self.by_line())):
      lines.append(f"top {min(top, len(rows))} {title} by engine time "
                   f"(busy summed over engines and DMA queues):")
      lines.append("      us  % busy  engine  instr      bytes    HBM bytes        flops    MFU    MBU"
                   "  bottleneck            lowering  "
                   + ("op  at" if title == "ops" else "line  ops"))
      for o in rows[:top]:
        what = f"{o.key} ({o.op})  {o.location}" if title == "ops" else f"{o.key}  {o.op}"
        lines.append(f"  {o.busy_ns / 1e3:6.2f} {100 * o.busy_ns / all_busy:7.1f}  {o.engine:<6}"
                     f"{o.instructions:6d} {o.bytes:10d} {o.hbm_bytes:12d} {o.flops:12d}"
                     f" {100 * o.utilization.mfu:5.1f}% {100 * o.utilization.mbu:5.1f}%"
                     f"  {o.bottleneck or '-':<20}  {o.lowering or '-':<8}  {what}")
      gpsimd = [o for o in rows if o.lowering == "gpsimd"]
      if gpsimd and title == "ops":
        lines.append(f"  GpSimd fallbacks: {len(gpsimd)} ops, "
                     f"{sum(o.busy_ns for o in gpsimd) / 1e3:.2f} us of engine time")
    lines += profile_collectives.report_lines(self)
    path = self.critical_path()
    per_stream: dict[str, float] = collections.defaultdict(float)
    per_op: dict[str, float] = collections.defaultdict(float)
    for step in path:
      per_stream[step.record["stream"]] += step.contribution_ns
      d = self.debug_entry(step.record["debug_id"])
      per_op[f"{d.name or d.op} {d.line}".strip()] += step.contribution_ns
    lines.append(f"critical path: {len(path)} instructions, "
                 f"{sum(s.contribution_ns for s in path) / 1e3:.2f} us: " + ", ".join(
                     f"{s} {100 * ns / total:.0f} %"
                     for s, ns in sorted(per_stream.items(), key=lambda kv: -kv[1])))
    for name, ns in sorted(per_op.items(), key=lambda kv: -kv[1])[:3]:
      lines.append(f"  {ns / 1e3:8.2f} us  {name}")
    advice = profile_advice.fix_first(self)
    if advice:
      lines.append("what to fix first:")
      lines += [f"  {a.format()}" for a in advice]
    return "\n".join(lines)

  def to_html(self, path: str | os.PathLike) -> None:
    """Writes a self-contained HTML report (timeline, top ops and lines, engine utilization,
    HBM traffic, what to fix first) that any browser opens without a network."""
    self._require_timeline()
    profile_html.write(self, path)

  def perfetto_events(self) -> list[dict]:
    """Chrome trace-event JSON events (ts/dur in us): one process for the device, one thread per
    engine and DMA queue, each instruction a complete event of its busy time, a flow from
    the instruction that released each semaphore wait to the one that waited, and the
    collectives on a track of their own (profile_collectives.py)."""
    self._require_timeline()
    pid = self.device_id
    streams = self._by_stream()
    done = self._done_times(streams)
    tids = {name: i for i, name in enumerate(sorted(streams, key=_track_key))}
    label = f"trn device {self.device_id}" + (f" ({self.target})" if self.target else "")
    events = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": label}},
              {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
               "args": {"sort_index": pid}}]
    for name, tid in tids.items():
      events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                     "args": {"name": name}})
      events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                     "args": {"sort_index": tid}})
    lowering = self.lowerings()
    flow_id = self.device_id << 32
    for name, records in streams.items():
      free = 0.0
      for r in records:
        d = self.debug_entry(r["debug_id"])
        args = {"op": d.op, "name": d.name, "source": d.location, "bytes": r["bytes"],
                "hbm_bytes": r.get("hbm_bytes", 0), "flops": r["flops"], "debug_id": r["debug_id"], "index": r.get("index", -1),
                "completes_us": r["end_ns"] / 1e3}
        if r["debug_id"] in lowering:
          args["lowering"] = lowering[r["debug_id"]]
        if r.get("waits"):
          args["waits"] = [f"{s}>={c}" for s, c in r["waits"]]
        gap = r["start_ns"] - free
        producer = self._binding_wait(r, done) if gap > _EPS_NS else None
        if gap > _EPS_NS:
          args["semaphore_wait_us"] = gap / 1e3
          if producer is not None:
            args["released_by"] = f"{producer['stream']}#{producer.get('index', -1)}"
        events.append({"ph": "X", "name": r["opcode"], "cat": name, "pid": pid,
                       "tid": tids[name], "ts": r["start_ns"] / 1e3, "dur": _busy_ns(r) / 1e3,
                       "args": args})
        if producer is not None:
          flow_id += 1
          events.append({"ph": "s", "name": "semaphore", "cat": "semaphore", "id": flow_id,
                         "pid": pid, "tid": tids[producer["stream"]],
                         "ts": producer["start_ns"] / 1e3})
          events.append({"ph": "f", "bp": "e", "name": "semaphore", "cat": "semaphore",
                         "id": flow_id, "pid": pid, "tid": tids[name], "ts": r["start_ns"] / 1e3})
        free = max(free, r.get("busy_end_ns", r["end_ns"]))
    return events + profile_collectives.perfetto_events(self, pid, len(tids))

  def collectives(self) -> list[profile_collectives.CollectiveTime]:
    """Every collective instruction this core ran: bytes, algorithm, group size, time waiting
    for the slowest peer, time on the interconnect, link utilization (profile_collectives.py)."""
    self._require_timeline()
    return profile_collectives.collective_times(self)

  def to_perfetto(self, path: str | os.PathLike) -> None:
    """Writes this execution as a trace that https://ui.perfetto.dev (or chrome://tracing)
    loads."""
    write_perfetto(path, [self])


def _add(entry: OpTime, r: dict) -> None:
  busy = _busy_ns(r)
  entry.busy_ns += busy
  entry.streams[r["stream"]] = entry.streams.get(r["stream"], 0.0) + busy
  entry.instructions += 1
  entry.bytes += r["bytes"]
  entry.hbm_bytes += r.get("hbm_bytes", 0)
  if r["opcode"] == "matmul":
    entry.flops += r["flops"]
    if r.get("fp8"):
      entry.fp8_flops += r["flops"]
  elif r["opcode"] == "transpose":
    entry.transpose_flops += r["flops"]


def write_perfetto(path: str | os.PathLike, profiles) -> None:
  """Writes several devices' profiles (one process each) into one Perfetto/Chrome trace."""
  events = []
  for profile in profiles:
    events += profile.perfetto_events()
  with open(path, "w") as f:
    json.dump({"traceEvents": events, "displayTimeUnit": "ns",
               "otherData": {"source": "jax-trn timing model (estimates, not measurements)"}}, f)


@contextlib.contextmanager
def trace():
  """Record the per-instruction timeline of the executions inside the block (any device), so
  `last_execution(device)` can attribute time to ops and lines and write a Perfetto trace.
  Outside it (and without TRN_PROFILE=1) executions keep only the per-engine summary."""
  _native.set_record_timeline(True)
  try:
    yield
  finally:
    _native.set_record_timeline(False)


def last_execution(device=None) -> ExecutionProfile:
  """The profile of the most recent execution on `device` (a jax Device or an id; default 0)."""
  device_id = 0 if device is None else getattr(device, "id", device)
  raw = _native.last_execution(int(device_id))
  if raw is None:
    raise LookupError(f"no program has run on trn device {device_id} yet")
  return profile_from_raw(raw, int(device_id))


def profile_from_raw(raw: dict, device_id: int = 0) -> ExecutionProfile:
  """An ExecutionProfile from the runtime's profile dict (last_execution, run_program)."""
  streams = {name: StreamTime(float(s["busy_ns"]), int(s["instructions"]))
             for name, s in raw["streams"].items()}
  debug = tuple(DebugEntry(d["op"], d["name"], d["location"], d["lowering"], d["rule"])
                for d in raw.get("debug", ()))
  return ExecutionProfile(int(device_id), float(raw["device_time_ns"]), int(raw["matmul_flops"]),
                          streams, list(raw.get("timeline", [])), debug, raw.get("target", ""),
                          int(raw["fp8_matmul_flops"]), int(raw["transpose_flops"]),
                          int(raw["hbm_bytes"]), config.current().resolved_lnc())
