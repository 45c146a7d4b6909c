"""The compile report: how each op of a program was lowered, so slow paths are visible.

Per op name: how many ops were lowered natively (tiled on the engines / views with no data
movement) or by GpSimd general-purpose instructions, and at which source lines. Logged at INFO
after every compile; kept by the driver (`driver.last_report()`, `driver.reports()`).
"""

from __future__ import annotations

import collections
import dataclasses


@dataclasses.dataclass(frozen=True)
class LoweredOp:
  op: str            # "stablehlo.add"
  kind: str          # "native" | "gpsimd" | "empty" (zero-size result, no instructions)
  location: str      # "file.py:3:4" or ""
  name: str          # JAX's name for it ("jit(f)/add")
  instructions: int  # instructions emitted for it


@dataclasses.dataclass
class CompileReport:
  module: str = ""
  target: str = ""
  ops: list[LoweredOp] = dataclasses.field(default_factory=list)

  def add(self, lowered: LoweredOp) -> None:
    self.ops.append(lowered)

  def summary(self) -> dict[str, dict[str, int]]:
    """{op name: {kind: count}}."""
    table: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for entry in self.ops:
      table[entry.op][entry.kind] += 1
    return {op: dict(kinds) for op, kinds in sorted(table.items())}

  def gpsimd_ops(self) -> list[LoweredOp]:
    """Ops that run as GpSimd general-purpose instructions (the slow path)."""
    return [e for e in self.ops if e.kind == "gpsimd"]

  def format(self) -> str:
    lines = [f"compile report for {self.module or 'module'} on {self.target}:"]
    for op, kinds in self.summary().items():
      counts = ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items()))
      lines.append(f"  {op}: {counts}")
      if "gpsimd" in kinds:
        places = sorted({e.location for e in self.ops if e.op == op and e.kind == "gpsimd"
                         and e.location})
        if places:
          lines.append(f"    gpsimd at {', '.join(places[:8])}"
                       f"{' ...' if len(places) > 8 else ''}")
    return "\n".join(lines)

  def __str__(self) -> str:
    return self.format()
