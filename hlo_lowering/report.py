"""The compile report: how each op of a program was lowered, so slow paths are visible.

Per op name: how many ops were lowered natively (tiled on the engines / views with no data
movement) or by GpSimd general-purpose instructions, and at which source lines. Logged at INFO
after every compile by the plugin's compile service, which keeps every report
(`jax_trn.compile_report()`, `jax_trn.compilation.reports()`); the compiler itself keeps none.
"""

from __future__ import annotations

import collections
import dataclasses

FUSION = "trn.fusion"


@dataclasses.dataclass(frozen=True)
class LoweredOp:
  op: str            # "stablehlo.add"
  kind: str          # "native" | "gpsimd" | "empty" (zero-size result, no instructions)
  location: str      # "file.py:3:4" or ""
  name: str          # JAX's name for it ("jit(f)/add")
  instructions: int  # instructions emitted for it
  fused_ops: int = 0  # trn.fusion: how many ops its region holds
  fused: bool = False  # an op of a trn.fusion region (its instructions count on the fusion)


@dataclasses.dataclass
class CompileReport:
  module: str = ""
  target: str = ""
  ops: list[LoweredOp] = dataclasses.field(default_factory=list)
  # Peak bytes per partition held by live SBUF / PSUM buffers (the back end's plan-memory).
  sbuf_peak_bytes: int = 0
  psum_peak_bytes: int = 0
  # Donated parameters whose output reuses their buffer (the back end's alias-donations).
  donated_parameters: list[int] = dataclasses.field(default_factory=list)

  def add(self, lowered: LoweredOp) -> None:
    self.ops.append(lowered)

  def add_op(self, op, kind: str, instructions: int) -> None:
    """Records how codegen lowered `op` (an ir.Op); a trn.fusion also records each op of its
    region, lowered natively inside the fusion, so per-op coverage stays visible."""
    if op.name != FUSION:
      self.add(LoweredOp(op.name, kind, op.loc.position, op.loc.name, instructions))
      return
    inner = op.regions[0].block.ops[:-1]
    self.add(LoweredOp(op.name, kind, op.loc.position, op.loc.name, instructions,
                       fused_ops=len(inner)))
    for member in inner:
      self.add(LoweredOp(member.name, kind, member.loc.position, member.loc.name, 0,
                         fused=True))

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
      entries = [e for e in self.ops if e.op == op]
      if op == FUSION:
        counts += f" ({sum(e.fused_ops for e in entries)} ops)"
      elif any(e.fused for e in entries):
        counts += f" ({sum(e.fused for e in entries)} fused)"
      lines.append(f"  {op}: {counts}")
      if "gpsimd" in kinds:
        places = sorted({e.location for e in self.ops if e.op == op and e.kind == "gpsimd"
                         and e.location})
        if places:
          lines.append(f"    gpsimd at {', '.join(places[:8])}"
                       f"{' ...' if len(places) > 8 else ''}")
    lines.append(f"  on-chip memory per partition: SBUF peak {self.sbuf_peak_bytes} bytes, "
                 f"PSUM peak {self.psum_peak_bytes} bytes")
    return "\n".join(lines)

  def __str__(self) -> str:
    return self.format()
