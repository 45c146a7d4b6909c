"""The compile report: how each op of a program was lowered, so slow paths are visible.

Per op name: how many ops were lowered natively (tiled on the engines / views with no data
movement) or by GpSimd general-purpose instructions, and at which source lines; where the compile
time went (import, passes, lowering, each back-end stage); how many instructions each engine and
DMA queue got; the SBUF/PSUM peaks. Logged at INFO
after every compile by the plugin's compile service, which keeps every report
(`jax_trn.compile_report()`, `jax_trn.compilation.reports()`); the compiler itself keeps none.
"""

from __future__ import annotations

import collections
import dataclasses

FUSION = "trn.fusion"
# Ops whose region is lowered as one by their rule (the fusion passes' ops).
FUSED_OPS = frozenset({FUSION, "trn.row_fusion", "trn.matmul_pair"})
# What a program whose float64 was narrowed is told (the report's line, the compile's warning).
FLOAT64_AS_FLOAT32 = ("float64 computed as float32 (TRN_FLOAT64=float32): results carry float32 "
                      "rounding, not float64's (docs/numerics.md, \"float64 as float32\")")


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
  # Multi-core programs: the ops ("stablehlo.sort at f.py:3:4") each core ran replicated on
  # whole operands gathered from their shards (partition-spmd had no local rule for them).
  replicated_ops: list[str] = dataclasses.field(default_factory=list)
  # The program held float64 and computes it as float32 (TRN_FLOAT64=float32, narrow-float64).
  float64_as_float32: bool = False
  # Seconds per compile phase ("import", "passes", "lowering", "backend") and per back-end stage,
  # in order, of this compile: empty for a compile-cache hit (nothing was compiled). Not part of
  # the report's content (equality, format(), the cache entry): a recompile takes other times.
  phase_seconds: dict[str, float] = dataclasses.field(default_factory=dict, compare=False)
  stage_seconds: dict[str, float] = dataclasses.field(default_factory=dict, compare=False)
  # Instructions per stream ("PE", "ACT", "DVE", "POOL", "SP", "DMA0", ...); block exits apart.
  instructions_per_stream: dict[str, int] = dataclasses.field(default_factory=dict)

  def add(self, lowered: LoweredOp) -> None:
    self.ops.append(lowered)

  def add_op(self, op, kind: str, instructions: int) -> None:
    """Records how codegen lowered `op` (an ir.Op); a trn.fusion also records each op of its
    region, lowered natively inside the fusion, so per-op coverage stays visible."""
    if op.name not in FUSED_OPS:
      self.add(LoweredOp(op.name, kind, op.loc.position, op.loc.name, instructions))
      return
    inner = op.regions[0].block.ops[:-1]
    self.add(LoweredOp(op.name, kind, op.loc.position, op.loc.name, instructions,
                       fused_ops=len(inner)))
    for member in inner:
      if member.name in FUSED_OPS:  # a trn.fusion inside a trn.row_fusion: its ops
        self.add_op(member, kind, 0)
      else:
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
      if op in FUSED_OPS:
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
    if self.float64_as_float32:
      lines.append(f"  {FLOAT64_AS_FLOAT32}")
    if self.replicated_ops:
      lines.append(f"  run replicated on gathered shards: {', '.join(self.replicated_ops[:8])}"
                   f"{' ...' if len(self.replicated_ops) > 8 else ''}")
    lines.append(f"  on-chip memory per partition: SBUF peak {self.sbuf_peak_bytes} bytes, "
                 f"PSUM peak {self.psum_peak_bytes} bytes")
    if self.instructions_per_stream:
      engines = {k: n for k, n in self.instructions_per_stream.items() if not k.startswith("DMA")}
      queues = {k: n for k, n in self.instructions_per_stream.items() if k.startswith("DMA")}
      lines.append("  instructions: " + ", ".join(f"{k} {n}" for k, n in engines.items())
                   + (f", DMA {sum(queues.values())} on {len(queues)} queues" if queues else ""))
    return "\n".join(lines)

  def format_timing(self) -> str:
    """Where this compile's time went, in ms; says so when the program came from the cache."""
    if not self.phase_seconds:
      return "  compile time: none (served from the compile cache)"
    stages = ", ".join(f"{k} {1e3 * t:.1f}" for k, t in self.stage_seconds.items())
    return (f"  compile time {1e3 * sum(self.phase_seconds.values()):.1f} ms: "
            + ", ".join(f"{k} {1e3 * t:.1f}" for k, t in self.phase_seconds.items())
            + (f" (back-end stages: {stages})" if stages else ""))

  def __str__(self) -> str:
    """The content (format()) and this compile's timing: what the compile service logs."""
    return self.format() + "\n" + self.format_timing()
