"""The modeled device time of the last execution on a device, per engine: the profiler's base.

Every execution records what the timing model charged (shared/design/neuroncore.md): total device
time, and for each engine and DMA queue its busy time and instruction count. With TRN_PROFILE=1
the runtime also keeps the per-instruction timeline, each instruction tied to the StableHLO op and
the user's source line it came from.
"""

from __future__ import annotations

import dataclasses

from jax_trn import _native

ENGINES = ("PE", "ACT", "DVE", "POOL", "SP")


@dataclasses.dataclass(frozen=True)
class StreamTime:
  busy_ns: float
  instructions: int


@dataclasses.dataclass(frozen=True)
class ExecutionProfile:
  device_id: int
  device_time_ns: float
  matmul_flops: int
  streams: dict[str, StreamTime]
  timeline: list[dict]

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

  def format(self) -> str:
    """One line per engine, and one for the DMA queues together."""
    lines = [f"device {self.device_id}: modeled device time {self.device_time_ns / 1e3:.2f} us"]
    for name in ENGINES:
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


def last_execution(device=None) -> ExecutionProfile:
  """The profile of the most recent execution on `device` (a jax Device or an id; default 0)."""
  device_id = 0 if device is None else getattr(device, "id", device)
  raw = _native.last_execution(int(device_id))
  if raw is None:
    raise LookupError(f"no program has run on trn device {device_id} yet")
  streams = {name: StreamTime(float(s["busy_ns"]), int(s["instructions"]))
             for name, s in raw["streams"].items()}
  return ExecutionProfile(int(device_id), float(raw["device_time_ns"]), int(raw["matmul_flops"]),
                          streams, list(raw.get("timeline", [])))
