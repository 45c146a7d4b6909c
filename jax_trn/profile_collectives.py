"""The collectives of one core's execution, as the profiler shows them (docs/profiling.md
"Collectives"): each collective instruction's bytes, algorithm, group size, the time it waited
for the slowest peer of its group, its own time on the interconnect, and its link utilization
(its bandwidth over what the same algorithm gets from the same links once latency vanishes:
1.0 is link-bound, small values latency-bound). The figures come from the simulator's
interconnect model (pjrt_plugin/sim/interconnect_timing.cc): estimates, not measurements.
"""

from __future__ import annotations

import dataclasses

from jax_trn import _native

TRACK = "collectives"


def algorithm_names() -> dict[int, str]:
  constants = _native.isa_tables()["constants"]
  return {constants["COLLECTIVE_RING"]: "ring",
          constants["COLLECTIVE_HALVING_DOUBLING"]: "halving-doubling",
          constants["COLLECTIVE_HIERARCHICAL"]: "hierarchical"}


@dataclasses.dataclass
class CollectiveTime:
  op: str               # "stablehlo.all_reduce"
  name: str             # the JAX name ("psum")
  location: str         # "train.py:12:8"
  start_ns: float       # this core's arrival
  peer_wait_ns: float   # from its arrival to its group's last member's
  time_ns: float        # on the interconnect, from the last arrival to completion
  bytes: int            # the largest buffer (the reduced or gathered one)
  algorithm: str        # "ring", "halving-doubling", "hierarchical"
  group_size: int
  link_utilization: float


def collective_times(profile) -> list[CollectiveTime]:
  """Every collective of `profile` (an ExecutionProfile with a timeline), by start time."""
  names = algorithm_names()
  out = []
  for r in sorted(profile.timeline, key=lambda r: r["start_ns"]):
    c = r.get("collective")
    if c is None:
      continue
    d = profile.debug_entry(r["debug_id"])
    out.append(CollectiveTime(
        op=d.op, name=d.name, location=d.location, start_ns=r["start_ns"],
        peer_wait_ns=c["peer_wait_ns"],
        time_ns=r["end_ns"] - r["start_ns"] - c["peer_wait_ns"], bytes=r["bytes"],
        algorithm=names.get(c["algorithm"], str(c["algorithm"])), group_size=c["group_size"],
        link_utilization=c["link_utilization"]))
  return out


def perfetto_events(profile, pid: int, tid: int) -> list[dict]:
  """The collectives' own track of one core's process: a "waiting for the slowest peer" slice,
  then the collective with its bytes, algorithm, group and link utilization."""
  collectives = collective_times(profile)
  if not collectives:
    return []
  events = [{"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": TRACK}},
            {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
             "args": {"sort_index": tid}}]
  for c in collectives:
    if c.peer_wait_ns > 0:
      events.append({"ph": "X", "name": "waiting for the slowest peer", "cat": TRACK,
                     "pid": pid, "tid": tid, "ts": c.start_ns / 1e3,
                     "dur": c.peer_wait_ns / 1e3, "args": {"op": c.op, "source": c.location}})
    events.append({"ph": "X", "name": f"{c.op.removeprefix('stablehlo.')} ({c.algorithm})",
                   "cat": TRACK, "pid": pid, "tid": tid,
                   "ts": (c.start_ns + c.peer_wait_ns) / 1e3, "dur": c.time_ns / 1e3,
                   "args": {"op": c.op, "name": c.name, "source": c.location, "bytes": c.bytes,
                            "algorithm": c.algorithm, "group_size": c.group_size,
                            "peer_wait_us": c.peer_wait_ns / 1e3,
                            "link_utilization": round(c.link_utilization, 4)}})
  return events


def report_lines(profile) -> list[str]:
  collectives = collective_times(profile)
  if not collectives:
    return []
  lines = [f"collectives: {len(collectives)}, "
           f"{sum(c.time_ns for c in collectives) / 1e3:.2f} us on the interconnect, "
           f"{sum(c.peer_wait_ns for c in collectives) / 1e3:.2f} us waiting for peers",
           "      us  wait us        bytes  algorithm         group  link util  op  at"]
  for c in collectives:
    lines.append(f"  {c.time_ns / 1e3:6.2f} {c.peer_wait_ns / 1e3:8.2f} {c.bytes:12d}  "
                 f"{c.algorithm:<16} {c.group_size:6d} {100 * c.link_utilization:9.1f}%  "
                 f"{c.name or c.op} ({c.op})  {c.location}")
  return lines
