"""What to fix first in an execution: the ops that set its device time, ranked by how much of it
they account for on the critical path, each with its bottleneck and the change that addresses it.

An op's share of the critical path is what removing its cost could at most save (the device time
is the critical path's length), so it ranks better than busy time, which counts engines running
in parallel. The hints follow from the bottleneck names of jax_trn/roofline.py.
"""

from __future__ import annotations

import collections
import dataclasses

# An op accounting for less of the critical path than this is not worth a line.
_MIN_SHARE = 0.02
# TensorE FLOPs on transposes above this share of an op's matmul FLOPs are worth removing.
_TRANSPOSE_SHARE = 0.2
# Below this MFU over its own active time a TensorE-bound op is under-using the array.
_LOW_MFU = 0.5


@dataclasses.dataclass(frozen=True)
class Advice:
  share: float      # of the device time, on the critical path
  op: object        # the profile's OpTime
  hint: str         # what to change

  def format(self) -> str:
    o = self.op
    return (f"{100 * self.share:4.0f} % of the device time: {o.key} ({o.op}) at "
            f"{o.location or '(no source line)'} is {o.bottleneck or 'unclassified'}"
            f"{': ' + o.why if o.why else ''}. {self.hint}")


def _hint(o) -> str:
  label = o.bottleneck
  if label == "GpSimd general path":
    return ("Give it a native lowering (docs/coverage.md) or express it with ops that lower "
            "natively; TRN_STRICT=1 lists every such op at compile time.")
  if label == "HBM-bandwidth-bound":
    return (f"It moves {o.hbm_bytes / 1e6:.2f} MB through HBM: fuse it with its neighbours so "
            "each tensor crosses HBM once.")
  if label == "DMA-bandwidth-bound":
    return (f"It moves {o.bytes / 1e6:.2f} MB at the core's DMA limit: move fewer bytes (fuse "
            "it with its neighbours, narrower dtypes).")
  if label == "DMA-bound":
    return ("Read its operands in long contiguous runs (>= 512 B per partition): avoid "
            "broadcast, strided or transposed operands, or compute them on chip.")
  if label.startswith("waiting on"):
    return ("Its engine sat idle until another stream released it: overlap the transfers it "
            "waits for with compute (larger tiles, fewer dependent steps).")
  if label == "TensorE-bound":
    if o.flops and o.transpose_flops > _TRANSPOSE_SHARE * o.flops:
      return (f"{100 * o.transpose_flops / max(o.flops, 1):.0f} % of its TensorE work is "
              "transposes: keep operands in the layout the matmul consumes.")
    if o.utilization.mfu < _LOW_MFU:
      return (f"MFU {100 * o.utilization.mfu:.0f} % while it runs: fp32 operands run at a "
              "quarter of the bf16 rate, tiles short of 128x128 leave the array part idle, and "
              "at LNC=2 a matmul too small to split runs on one of the device's two cores.")
    return "It runs near the TensorE roofline: only fewer FLOPs make it faster."
  if label in ("VectorE-bound", "ScalarE-bound", "GpSimdE-bound"):
    return ("Elementwise work bounds it: fuse elementwise chains, use bf16, or balance the work "
            "between VectorE and ScalarE.")
  return "Look at its instructions in the timeline (to_perfetto / to_html)."


def fix_first(profile, top: int = 3) -> list[Advice]:
  """The `top` ops (by_op entries) that account for most of the critical path, most first."""
  per_op: dict[int, float] = collections.defaultdict(float)
  for step in profile.critical_path():
    per_op[step.record["debug_id"]] += step.contribution_ns
  total = max(profile.device_time_ns, 1e-9)
  ops = {o.debug_ids[0]: o for o in profile.by_op()}
  ranked = sorted((ns, debug_id) for debug_id, ns in per_op.items() if debug_id in ops)
  advice = [Advice(ns / total, ops[debug_id], _hint(ops[debug_id]))
            for ns, debug_id in reversed(ranked) if ns / total >= _MIN_SHARE]
  return advice[:top]
