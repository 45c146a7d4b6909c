"""The roofline of a JAX device: MFU, HFU and MBU of an execution or an op against the device's
peak, and the bottleneck of an op.

The figures are the ones AWS's Neuron Explorer reports (its glossary, docs/profiling.md):

- **MFU** (model FLOPs utilization): the useful matmul FLOPs (2·M·N·K of every TensorE matmul;
  no transposes) over what the device's TensorE could do at its bf16 peak in the same time.
  FLOPs that ran at the fp8 rate count half ("adjusted FLOPs"), so an fp8 matmul at its full
  rate reaches 100 %.
- **HFU** (hardware FLOPs utilization): the same with the TensorE transposes (matmuls against
  the identity, pure data movement) added: HFU >= MFU, the gap is compute spent moving data.
- **MBU** (memory bandwidth utilization): bytes read from and written to HBM over what the
  device's share of its chip's HBM bandwidth could move in the same time.

The peak is the JAX device's: `physical_cores` NeuronCores (LNC=2 on trn2: two) each at
2 · partitions · stationary columns · TensorE clock FLOPs per ns (79 bf16 TFLOPS per trn2 core),
and the device's share of the chip's HBM bandwidth (trn2: 2.9 TB/s over 8 cores, ×2 at LNC=2).
"""

from __future__ import annotations

import dataclasses

from jax_trn import _native

# What an engine's name means to a user, for the bottleneck of an op.
ENGINE_TITLES = {"PE": "TensorE", "ACT": "ScalarE", "DVE": "VectorE", "POOL": "GpSimdE",
                 "SP": "SyncE", "DMA": "DMA"}
# An op whose DMA moves HBM at this fraction of the device's HBM peak, or bytes at this fraction
# of a core's DMA limit, is bandwidth-bound; below both its transfers are slow for their size
# (short contiguous runs, small transfers).
HBM_BOUND_FRACTION = 0.6


@dataclasses.dataclass(frozen=True)
class DevicePeak:
  """The peak figures of one JAX device."""
  target: str
  physical_cores: int
  bf16_flops_per_ns: float    # TensorE bf16 peak of all the device's cores
  hbm_bytes_per_ns: float     # the device's share of its chip's HBM bandwidth
  dma_bytes_per_ns_per_core: float  # one core's DMA engines together (what one core can move)

  @property
  def tflops(self) -> float:
    return self.bf16_flops_per_ns / 1e3


def device_peak(target: str, physical_cores: int) -> DevicePeak:
  """The peak of a device of `physical_cores` NeuronCores of generation `target`."""
  spec = _native.target_spec(target)
  per_core = (2 * spec["partitions"] * spec["matmul_stationary_free_max"]
              * spec["tensor_clock_ghz"])
  hbm = spec["hbm_bytes_per_ns_per_chip"] * physical_cores / spec["physical_cores_per_chip"]
  dma = spec["dma_engines_per_core"] * spec["dma_bytes_per_ns_per_engine"]
  return DevicePeak(target, physical_cores, per_core * physical_cores, hbm, dma)


@dataclasses.dataclass(frozen=True)
class Utilization:
  """MFU, HFU and MBU over a stretch of device time, as fractions (0.5 = 50 %)."""
  mfu: float
  hfu: float
  mbu: float

  def format(self) -> str:
    return f"MFU {100 * self.mfu:.1f} %  HFU {100 * self.hfu:.1f} %  MBU {100 * self.mbu:.1f} %"


def utilization(peak: DevicePeak, time_ns: float, matmul_flops: int, fp8_matmul_flops: int,
                transpose_flops: int, hbm_bytes: int) -> Utilization:
  """The figures of `time_ns` of device time that did these FLOPs and moved these HBM bytes."""
  if time_ns <= 0:
    return Utilization(0.0, 0.0, 0.0)
  model = matmul_flops - fp8_matmul_flops / 2  # adjusted FLOPs: fp8 runs at twice the bf16 rate
  flops_capacity = time_ns * peak.bf16_flops_per_ns
  return Utilization(model / flops_capacity, (model + transpose_flops) / flops_capacity,
                     hbm_bytes / (time_ns * peak.hbm_bytes_per_ns))


def bottleneck(lowering: str, resource_ns: dict[str, float], waited_on: dict[str, float],
               waited_ns: float, mbu: float, dma_fraction: float) -> tuple[str, str]:
  """(label, why) for an op: what bounded it.

  `resource_ns` is the time the op held each engine ("PE", "ACT", "DVE", "POOL", "SP") and the
  time any of its DMA transfers was in flight ("DMA"); `waited_on` the time its instructions
  sat ready in program order waiting on another op's instructions, by the stream they waited
  for ("DMA" for any queue), and `waited_ns` that time over all its streams together; `mbu` its
  MBU and `dma_fraction` its DMA bytes per ns of DMA activity over one core's DMA limit. GpSimd
  general-path ops are named as such first: the fix is a native lowering."""
  if lowering == "gpsimd":
    return "GpSimd general path", "runs as GpSimd general-purpose instructions (no native lowering)"
  busiest = max(resource_ns, key=resource_ns.get, default="")
  held = resource_ns.get(busiest, 0.0)
  waited = waited_ns
  if waited > held and waited_on:
    on = max(waited_on, key=waited_on.get)
    return (f"waiting on {ENGINE_TITLES.get(on, on)}",
            f"its instructions waited {waited / 1e3:.2f} us on semaphores "
            f"({ENGINE_TITLES.get(on, on)} most), more than it ran")
  if not busiest:
    return "", ""
  if busiest == "DMA":
    if mbu >= HBM_BOUND_FRACTION:
      return "HBM-bandwidth-bound", f"its transfers move HBM at {100 * mbu:.0f} % of the peak"
    if dma_fraction >= HBM_BOUND_FRACTION:
      return ("DMA-bandwidth-bound", f"its transfers run at {100 * dma_fraction:.0f} % of one "
              f"core's DMA limit (MBU {100 * mbu:.0f} %: a program uses one core's DMA engines)")
    return ("DMA-bound", f"its transfers run at only {100 * dma_fraction:.0f} % of one core's "
            "DMA limit (short contiguous runs or small transfers)")
  return f"{ENGINE_TITLES.get(busiest, busiest)}-bound", (
      f"{ENGINE_TITLES.get(busiest, busiest)} busy {held / 1e3:.2f} us, "
      "longer than its other engines and its DMA")
