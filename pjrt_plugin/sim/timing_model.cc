#include "timing_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace trn::sim {
namespace {

// --- compute engines (neuroncore.md "Instruction costs") -----------------------------------
// MIN_II: the minimum initiation interval of an engine instruction, in engine cycles.
constexpr double kMinCycles = 64;
// The stationary operand's load overlaps the running matmul; below 64 columns it still costs
// 64 cycles ("max(min(64, N_stationary), N_moving)").
constexpr double kStationaryLoadCycles = 64;
// ScalarE activation with the free-axis sum: "max(64, N); with free-axis reduce + 64" (the
// v2 figure; est. on v3/v4 like ScalarE's other costs).
constexpr double kActivationReduceCycles = 64;
// VectorE reciprocal: max(64, 8N) (nki.isa.reciprocal's estimated cost on VectorE). A divide
// in tensor_scalar / tensor_tensor costs what the instruction's other arithmetic operators do:
// the NKI ISA pages of both list their cost by memory, dtype and contiguity, not by operator.
constexpr double kReciprocalCyclesPerElement = 8;
// est.: a ternary op streams three inputs through the two-input datapath of tensor_tensor
// (2N), so 3N.
constexpr double kTernaryCyclesPerElement = 3;
// nki.isa.bn_aggr's published cost (NKI ISA reference, Neuron 2.25): max(MIN_II, 13 · N / 3)
// cycles, N the elements per partition of its bn_stats tuples; bn_stats costs max(MIN_II, N).
constexpr double kBnAggrCyclesPerTuple = 13;
// trn2+ VectorE fast modes: 4x for bf16/fp16 contiguous SBUF copy/tensor_scalar, 2x when
// non-contiguous or touching PSUM, 2x for bf16 tensor_tensor.
constexpr double kFastModeContiguous = 4;
constexpr double kFastModeOther = 2;

// --- GpSimd (est.) --------------------------------------------------------------------------
// "iota / affine_select ≈150 + N": 150 cycles of fixed cost for a general-purpose op.
constexpr double kGpSimdOverheadCycles = 150;
// est.: 8 cores each retire one element per cycle on the general-purpose path (access-pattern
// loops over HBM do not use the 512-bit SIMD lanes fully).
constexpr double kGpSimdElementsPerCycle = 8;
// est.: transcendental functions cost ~8 cycles per element on a general-purpose core.
constexpr double kGpSimdTranscendentalCycles = 8;
// est.: GpSimd's integrated DMA moves HBM data at one DMA engine's rate.
constexpr double kGpSimdDmaEngines = 1;
// "dynamic-address copy max(600, N)": an instruction whose addresses come from data costs at
// least 600 cycles (gp_gather, gp_scatter).
constexpr double kGpDynamicAddressMinCycles = 600;
// est.: resolving one window (load its start coordinates, clamp, form the address) takes ~16
// scalar cycles on one general-purpose core, the cores splitting the windows.
constexpr double kGpWindowCycles = 16;
// est.: a scatter that combines (add/max/min/mul) reads and writes each element, twice a copy.
constexpr double kGpCombineCyclesPerElement = 2;
// est.: one key comparison of a merge sort (load two keys, compare, select) costs ~4 cycles on
// a general-purpose core; a stable sort of a row of L makes about L·log2(L) of them per key.
constexpr double kGpSortCompareCycles = 4;
// est.: an arg-reduction step compares values and indices and selects both: ~3 element-ops.
constexpr double kGpArgReduceCyclesPerElement = 3;
// gp_convolution (est.): one multiply-add per lane-cycle like gp_batch_matmul, plus the window
// address arithmetic of each output element (per spatial dim: a multiply-add, a bounds and a
// dilation test), ~8 cycles of one lane.
constexpr double kGpConvolutionCyclesPerMac = 1;
constexpr double kGpConvolutionAddressCycles = 8;

// gp_reduce_window (est.): each window position of each output element is one element-op
// (address test, load, combine), ~1 lane-cycle like gp_reduce, plus a rounding pass per window
// offset that is a narrow float (not charged separately: it overlaps the next offset's loads).
constexpr double kGpReduceWindowCyclesPerTap = 1;
// gp_select_and_scatter (est.): per source element, each window position is a compare and a
// select of value and position (~2 element-ops), then one read-modify-write of the pick.
constexpr double kGpSelectCyclesPerTap = 2;

// gp_region_* (est.): each step of the region program is one element-op of a lane (an ALU op
// on registers, ~1 lane-cycle like gp_elementwise), so an element costs the region's length.
constexpr double kGpRegionCyclesPerStep = 1;

// --- DMA (neuroncore.md "DMA") --------------------------------------------------------------
// A transfer is spread over up to 16 engines, ~8 partitions each.
constexpr int kDmaPartitionsPerEngine = 8;
// est.: HBM-to-HBM copies split in chunks of this many bytes per engine.
constexpr double kDmaHbmChunkBytes = 4096;
// est.: each contiguous run costs as much as this many bytes of transfer (descriptor
// processing): with 256 B runs half the time is overhead ("< 256 B is overhead-bound"), with
// 2 KiB runs ~89 % ("≥ 2 KiB recommended"), with 4 KiB ~94 % ("≥ 4 KiB saturates").
constexpr double kDmaRunOverheadBytes = 256;

// --- control flow (SP, block exits; est.) ----------------------------------------------------
// est.: a block boundary is one cross-engine semaphore round: each of the five engine
// sequencers (and the DMA queues through theirs) signals SP's semaphore, SP's wait retires and
// SP signals every engine back. The first hop is already in each engine's completion
// (target semaphore_handoff_ns); this is the second, ~64 cycles of the receiving sequencers
// (MIN_II, neuroncore.md) at ~1.2 GHz, plus SP's own instruction issue: ~100 ns.
constexpr double kBlockBarrierNs = 100;
// est.: SP reads the branch predicate / switch index (one element) from HBM with a register
// load: an HBM round trip, well below the ~1.3 us of a descriptor-based DMA (no descriptor, no
// queue) but still DRAM latency: ~500 ns.
constexpr double kSelectorReadNs = 500;

// --- the two physical cores of an LNC=2 device (est.; unpublished) --------------------------
// est.: a semaphore increment for the other core's sequencer is a posted write across the chip's
// on-chip fabric instead of the core's local sequencer path; the receiving sequencer's wake-up is
// already in semaphore_handoff_ns, the fabric round adds ~150 ns (about an SBUF-to-SBUF DMA's
// descriptor hand-off without its data). AWS does not publish the figure.
constexpr double kCrossCoreSemaphoreExtraNs = 150;

bool IsTwoByteFloat(DType t) { return t == DType::kBF16 || t == DType::kF16; }

bool IsTranscendental(AluOp op) {
  switch (op) {
    case AluOp::kExp: case AluOp::kExpm1: case AluOp::kLog: case AluOp::kLog1p: case AluOp::kTanh:
    case AluOp::kLogistic: case AluOp::kSin: case AluOp::kCos: case AluOp::kTan: case AluOp::kErf:
    case AluOp::kPow: case AluOp::kAtan2: case AluOp::kCbrt:
      return true;
    default:
      return false;
  }
}

// --- host callbacks (host_callback; est., docs/host-callbacks.md) ---------------------------
// est.: the device stalls POOL (and everything that waits on it) while the host runs a callback:
// the chip raises an interrupt, the host runtime's thread wakes, reads the operands, runs the
// callable and writes the results back, then rings the queue's doorbell. A PCIe round trip with
// an interrupt and a thread wake-up on each side is tens of microseconds; ~20 us. The Python
// callable's own run time is host time and is not modeled.
constexpr double kHostCallbackRoundTripNs = 20000;
// est.: operands and results cross the host link at an effective ~25 GB/s (a PCIe Gen5 x16
// link's ~64 GB/s less protocol and DMA-descriptor overhead for these small transfers).
constexpr double kHostLinkBytesPerNs = 25;

int64_t TileBytes(const TileAP& ap) { return ap.num_elements() * DTypeSize(ap.dtype); }

double RegionCycles(const RegionProgram& region) {
  return kGpRegionCyclesPerStep * static_cast<double>(std::max<size_t>(1, region.steps.size()));
}

int64_t HbmBytes(const Program& p, const HbmAP& ap) {
  return ap.num_elements() * DTypeSize(p.tensors[ap.tensor].dtype);
}

// Contiguous bytes per run of an access pattern: the innermost dims that nest densely.
double TileRunBytes(const TileAP& ap) {
  int64_t run = 1;
  for (int d = ap.num_free - 1; d >= 0; --d) {
    if (ap.free[d].stride != run && ap.free[d].count > 1) break;
    run *= ap.free[d].count;
  }
  return static_cast<double>(run * DTypeSize(ap.dtype));
}

double HbmRunBytes(const Program& p, const HbmAP& ap) {
  int64_t run = 1;
  for (int d = ap.num_dims - 1; d >= 0; --d) {
    if (ap.dims[d].stride != run && ap.dims[d].count > 1) break;
    run *= ap.dims[d].count;
  }
  return static_cast<double>(run * DTypeSize(p.tensors[ap.tensor].dtype));
}

bool IsFp8(DType t) { return t == DType::kF8E4M3FN || t == DType::kF8E5M2; }

InstructionTiming DmaTiming(Machine& machine, const DmaCopy& d, double start_ns) {
  const Program& p = machine.program;
  const TargetSpec& t = *p.target;
  const int64_t dst_bytes = d.dst.is_tile ? TileBytes(d.dst.tile) : HbmBytes(p, d.dst.hbm);
  const int64_t src_bytes = d.src.is_tile ? TileBytes(d.src.tile) : HbmBytes(p, d.src.hbm);
  const double bytes = static_cast<double>(std::max(dst_bytes, src_bytes));
  int partitions = 0;
  for (const Endpoint* e : {&d.dst, &d.src}) {
    if (e->is_tile) partitions = std::max<int>(partitions, e->tile.partition_count);
  }
  const double engines = partitions > 0
      ? std::ceil(static_cast<double>(partitions) / kDmaPartitionsPerEngine)
      : std::ceil(bytes / kDmaHbmChunkBytes);
  const double used = std::clamp(engines, 1.0, static_cast<double>(t.dma_engines_per_core));
  double run = std::min(d.dst.is_tile ? TileRunBytes(d.dst.tile) : HbmRunBytes(p, d.dst.hbm),
                        d.src.is_tile ? TileRunBytes(d.src.tile) : HbmRunBytes(p, d.src.hbm));
  const double efficiency = run / (run + kDmaRunOverheadBytes);
  const int hbm_crossings = (d.dst.is_tile ? 0 : 1) + (d.src.is_tile ? 0 : 1);
  const double end = machine.dma_bandwidth[machine.core].Transfer(
      start_ns, bytes, t.dma_bytes_per_ns_per_engine * used * efficiency, hbm_crossings);
  // The queue is busy until the transfer ends: the published end-to-end time the rate comes from
  // already contains the descriptor hand-off and the trigger-to-start latency.
  return {end - start_ns, end - start_ns, static_cast<int64_t>(bytes), 0};
}

InstructionTiming TensorTiming(const Program& p, const Instruction& inst) {
  const double ghz = p.target->tensor_clock_ghz;
  if (inst.opcode == Opcode::kMatmul) {
    const auto& m = std::get<Matmul>(inst.operands);
    const double cols = static_cast<double>(m.stationary.free_size());
    const double n = static_cast<double>(m.moving.free_size());
    const bool fp32 = m.stationary.dtype == DType::kF32 || m.moving.dtype == DType::kF32;
    const bool fp8 = RunsAtFp8Rate(m);
    const double rate = fp32 ? 1 / p.target->matmul_fp32_slowdown : fp8 ? p.target->matmul_fp8_speedup : 1;
    const double cycles = std::max(std::min(kStationaryLoadCycles, cols), n) / rate;
    const int64_t flops = 2 * m.stationary.free_size() * m.moving.free_size() * m.moving.partition_count;
    const double ns = cycles / ghz;
    return {ns, ns, TileBytes(m.stationary) + TileBytes(m.moving) + TileBytes(m.dst), flops};
  }
  const auto& tr = std::get<Transpose>(inst.operands);
  const double cycles = std::max(static_cast<double>(tr.src.partition_count),
                                 std::min(kMinCycles, static_cast<double>(tr.src.free_size()))) *
                        (tr.src.dtype == DType::kF32 ? p.target->matmul_fp32_slowdown : 1);
  const double ns = cycles / ghz;
  const int64_t flops = 2 * tr.src.num_elements() * tr.src.partition_count;
  return {ns, ns, TileBytes(tr.src) + TileBytes(tr.dst), flops};
}

// N (free elements per partition) and the cycle count of one VectorE instruction.
double VectorCycles(const TargetSpec& t, const Instruction& inst, int64_t* bytes) {
  const bool fast_modes = std::strcmp(t.core_version, "NeuronCore-v2") != 0;
  switch (inst.opcode) {
    case Opcode::kTensorTensor: {
      const auto& v = std::get<TensorTensor>(inst.operands);
      *bytes = TileBytes(v.a) + TileBytes(v.b) + TileBytes(v.dst);
      const double n = static_cast<double>(v.a.free_size());
      const bool psum_input = v.a.memory == Memory::kPsum || v.b.memory == Memory::kPsum;
      double cycles = psum_input ? n : 2 * n;
      if (fast_modes && IsTwoByteFloat(v.a.dtype) && IsTwoByteFloat(v.b.dtype)) cycles /= kFastModeOther;
      return std::max(kMinCycles, cycles);
    }
    case Opcode::kScalarTensorTensor: {
      // NKI's scalar_tensor_tensor: "approximately the same latency as a regular tensor_tensor"
      // (2N; N with an input in PSUM; trn2+'s 2x for two-byte floats), the scalar op at no cost.
      const auto& v = std::get<ScalarTensorTensor>(inst.operands);
      *bytes = TileBytes(v.data) + TileBytes(v.operand1) + TileBytes(v.dst);
      const double n = static_cast<double>(v.data.free_size());
      const bool psum_input = v.data.memory == Memory::kPsum || v.operand1.memory == Memory::kPsum;
      double cycles = psum_input ? n : 2 * n;
      if (fast_modes && IsTwoByteFloat(v.data.dtype) && IsTwoByteFloat(v.operand1.dtype)) cycles /= kFastModeOther;
      return std::max(kMinCycles, cycles);
    }
    case Opcode::kTensorScalar:
    case Opcode::kTensorCopy:
    case Opcode::kTensorUnary: {
      const TileAP* dst;
      const TileAP* src;
      AluOp op = AluOp::kCopy;
      if (inst.opcode == Opcode::kTensorScalar) {
        const auto& v = std::get<TensorScalar>(inst.operands);
        dst = &v.dst, src = &v.src, op = v.op;
      } else if (inst.opcode == Opcode::kTensorCopy) {
        const auto& v = std::get<TensorCopy>(inst.operands);
        dst = &v.dst, src = &v.src;
      } else {
        const auto& v = std::get<TensorUnary>(inst.operands);
        dst = &v.dst, src = &v.src, op = v.op;
      }
      *bytes = TileBytes(*dst) + TileBytes(*src);
      const double n = static_cast<double>(src->free_size());
      if (op == AluOp::kReciprocal) return std::max(kMinCycles, kReciprocalCyclesPerElement * n);
      double cycles = n;
      if (fast_modes && inst.opcode != Opcode::kTensorUnary && IsTwoByteFloat(dst->dtype) && IsTwoByteFloat(src->dtype)) {
        const bool sbuf = dst->memory == Memory::kSbuf && src->memory == Memory::kSbuf;
        cycles /= sbuf && dst->contiguous() && src->contiguous() ? kFastModeContiguous : kFastModeOther;
      }
      return std::max(kMinCycles, cycles);
    }
    case Opcode::kTensorReduce: {
      const auto& v = std::get<TensorReduce>(inst.operands);
      *bytes = TileBytes(v.src) + TileBytes(v.dst);
      const double n = static_cast<double>(v.src.free_size());
      const bool halved = v.src.dtype == DType::kBF16 && (v.op == AluOp::kAdd || v.op == AluOp::kMax);
      return halved ? n / 2 : n;
    }
    case Opcode::kBnStats: {
      const auto& v = std::get<BnStats>(inst.operands);
      *bytes = TileBytes(v.src) + TileBytes(v.dst);
      return std::max(kMinCycles, static_cast<double>(v.src.free_size()));
    }
    case Opcode::kBnAggr: {
      const auto& v = std::get<BnAggr>(inst.operands);
      *bytes = TileBytes(v.src) + TileBytes(v.dst);
      return std::max(kMinCycles, kBnAggrCyclesPerTuple * static_cast<double>(v.src.free_size() / 3));
    }
    case Opcode::kTensorTernary: {
      const auto& v = std::get<TensorTernary>(inst.operands);
      *bytes = TileBytes(v.a) + TileBytes(v.b) + TileBytes(v.c) + TileBytes(v.dst);
      return std::max(kMinCycles, kTernaryCyclesPerElement * static_cast<double>(v.b.free_size()));
    }
    default:
      *bytes = 0;
      return kMinCycles;
  }
}

InstructionTiming GpSimdTiming(const Program& p, const Instruction& inst) {
  const TargetSpec& t = *p.target;
  int64_t elements = 0, bytes = 0, flops = 0;
  double cycles_per_element = 1;
  double min_cycles = 0, extra_cycles = 0;  // data-dependent ops: floor and per-window cost
  switch (inst.opcode) {
    case Opcode::kIota:
    case Opcode::kAffineSelect: {
      // SBUF tiles, all partitions in parallel: the guide's 150 + N cycles, N per partition.
      const bool select = inst.opcode == Opcode::kAffineSelect;
      const TileAP& dst = select ? std::get<AffineSelect>(inst.operands).dst : std::get<Iota>(inst.operands).dst;
      const double ns = (kGpSimdOverheadCycles + static_cast<double>(dst.free_size())) / t.gpsimd_clock_ghz;
      return {ns, ns, TileBytes(dst) * (select ? 2 : 1), 0};
    }
    case Opcode::kGpElementwise: {
      const auto& g = std::get<GpElementwise>(inst.operands);
      elements = g.dst.num_elements();
      bytes = HbmBytes(p, g.dst);
      for (const HbmAP& s : g.srcs) bytes += HbmBytes(p, s);
      if (IsTranscendental(g.op)) cycles_per_element = kGpSimdTranscendentalCycles;
      break;
    }
    case Opcode::kGpCopy: {
      const auto& g = std::get<GpCopy>(inst.operands);
      elements = g.dst.num_elements();
      bytes = HbmBytes(p, g.dst) + HbmBytes(p, g.src);
      break;
    }
    case Opcode::kGpFill:
      elements = std::get<GpFill>(inst.operands).dst.num_elements();
      bytes = HbmBytes(p, std::get<GpFill>(inst.operands).dst);
      break;
    case Opcode::kGpIota:
      elements = std::get<GpIota>(inst.operands).dst.num_elements();
      bytes = HbmBytes(p, std::get<GpIota>(inst.operands).dst);
      break;
    case Opcode::kGpBitcast: {
      const auto& g = std::get<GpBitcast>(inst.operands);
      bytes = 2 * p.tensors[g.src].byte_size;
      elements = 0;  // a byte copy: bandwidth only
      break;
    }
    case Opcode::kGpReduce: {
      const auto& g = std::get<GpReduce>(inst.operands);
      elements = g.src.num_elements();
      bytes = HbmBytes(p, g.src) + HbmBytes(p, g.dst);
      break;
    }
    case Opcode::kGpBatchMatmul: {
      const auto& g = std::get<GpBatchMatmul>(inst.operands);
      elements = g.lhs.dims[0].count * g.lhs.dims[1].count * g.lhs.dims[2].count * g.rhs.dims[2].count;  // MACs
      flops = 2 * elements;
      bytes = HbmBytes(p, g.dst) + HbmBytes(p, g.lhs) + HbmBytes(p, g.rhs);
      break;
    }
    case Opcode::kGpGather:
    case Opcode::kGpScatter: {
      const bool gather = inst.opcode == Opcode::kGpGather;
      const HbmAP& rows = gather ? std::get<GpGather>(inst.operands).dst : std::get<GpScatter>(inst.operands).updates;
      const HbmAP& indices = gather ? std::get<GpGather>(inst.operands).indices : std::get<GpScatter>(inst.operands).indices;
      const bool combines = !gather && std::get<GpScatter>(inst.operands).op != AluOp::kCopy;
      elements = rows.num_elements();
      bytes = 2 * HbmBytes(p, rows) * (combines ? 2 : 1) + HbmBytes(p, indices);
      if (combines) cycles_per_element = kGpCombineCyclesPerElement;
      min_cycles = kGpDynamicAddressMinCycles;
      extra_cycles = static_cast<double>(rows.dims[0].count) * kGpWindowCycles / kGpSimdElementsPerCycle;
      break;
    }
    case Opcode::kGpArgReduce: {
      const auto& g = std::get<GpArgReduce>(inst.operands);
      elements = g.src_value.num_elements();
      bytes = HbmBytes(p, g.src_value) + HbmBytes(p, g.src_index) + HbmBytes(p, g.dst_value) + HbmBytes(p, g.dst_index);
      cycles_per_element = kGpArgReduceCyclesPerElement;
      break;
    }
    case Opcode::kGpSort: {
      const auto& g = std::get<GpSort>(inst.operands);
      const HbmAP& first = g.srcs[0];
      const double length = static_cast<double>(first.dims[first.num_dims - 1].count);
      elements = first.num_elements();
      for (size_t i = 0; i < g.srcs.size(); ++i) bytes += HbmBytes(p, g.srcs[i]) + HbmBytes(p, g.dsts[i]);
      // Each element is moved once per operand and compared ~log2(L) times per key.
      cycles_per_element = static_cast<double>(g.srcs.size()) + kGpSortCompareCycles * g.num_keys * std::max(1.0, std::ceil(std::log2(length)));
      break;
    }
    case Opcode::kGpReduceWindow: {
      const auto& g = std::get<GpReduceWindow>(inst.operands);
      int64_t taps = 1;
      for (const WindowDim& w : g.windows) taps *= w.size;
      elements = g.dst.num_elements() * taps;
      cycles_per_element = kGpReduceWindowCyclesPerTap;
      bytes = HbmBytes(p, g.src) + HbmBytes(p, g.dst);
      break;
    }
    case Opcode::kGpSelectAndScatter: {
      const auto& g = std::get<GpSelectAndScatter>(inst.operands);
      int64_t taps = 1;
      for (const WindowDim& w : g.windows) taps *= w.size;
      elements = g.source.num_elements() * taps;
      cycles_per_element = kGpSelectCyclesPerTap;
      extra_cycles = static_cast<double>(g.source.num_elements()) * kGpCombineCyclesPerElement / kGpSimdElementsPerCycle;
      bytes = HbmBytes(p, g.operand) + HbmBytes(p, g.source) + HbmBytes(p, g.dst);
      break;
    }
    case Opcode::kGpRegionReduce: {
      const auto& g = std::get<GpRegionReduce>(inst.operands);
      elements = g.srcs[0].num_elements();
      for (size_t i = 0; i < g.srcs.size(); ++i) bytes += HbmBytes(p, g.srcs[i]) + HbmBytes(p, g.dsts[i]) + HbmBytes(p, g.inits[i]);
      cycles_per_element = RegionCycles(g.region);
      break;
    }
    case Opcode::kGpRegionReduceWindow: {
      const auto& g = std::get<GpRegionReduceWindow>(inst.operands);
      int64_t taps = 1;
      for (const WindowDim& w : g.windows) taps *= w.size;
      elements = g.dsts[0].num_elements() * taps;
      for (size_t i = 0; i < g.srcs.size(); ++i) bytes += HbmBytes(p, g.srcs[i]) + HbmBytes(p, g.dsts[i]) + HbmBytes(p, g.inits[i]);
      cycles_per_element = RegionCycles(g.region);
      break;
    }
    case Opcode::kGpRegionScatter: {
      const auto& g = std::get<GpRegionScatter>(inst.operands);
      elements = g.updates[0].num_elements();
      // Each destination element is read and written, each update read.
      for (size_t i = 0; i < g.dsts.size(); ++i) bytes += 3 * HbmBytes(p, g.updates[i]);
      bytes += HbmBytes(p, g.indices);
      cycles_per_element = RegionCycles(g.region);
      min_cycles = kGpDynamicAddressMinCycles;
      extra_cycles = static_cast<double>(g.updates[0].dims[0].count) * kGpWindowCycles / kGpSimdElementsPerCycle;
      break;
    }
    case Opcode::kGpRegionSort: {
      const auto& g = std::get<GpRegionSort>(inst.operands);
      const HbmAP& first = g.srcs[0];
      const double length = static_cast<double>(first.dims[first.num_dims - 1].count);
      elements = first.num_elements();
      for (size_t i = 0; i < g.srcs.size(); ++i) bytes += HbmBytes(p, g.srcs[i]) + HbmBytes(p, g.dsts[i]);
      // As gp_sort, with each comparison the comparator region's length instead of a key compare.
      cycles_per_element = static_cast<double>(g.srcs.size()) + (kGpSortCompareCycles + RegionCycles(g.region)) * std::max(1.0, std::ceil(std::log2(length)));
      break;
    }
    case Opcode::kGpConvolution: {
      const auto& g = std::get<GpConvolution>(inst.operands);
      // MACs as if no tap fell on padding: dst elements x (I x kernel size).
      elements = g.rhs.dims[0].count ? g.dst.num_elements() * (g.rhs.num_elements() / g.rhs.dims[0].count) : 0;
      flops = 2 * elements;
      bytes = HbmBytes(p, g.dst) + HbmBytes(p, g.lhs) + HbmBytes(p, g.rhs);
      cycles_per_element = kGpConvolutionCyclesPerMac;
      extra_cycles = static_cast<double>(g.dst.num_elements()) * kGpConvolutionAddressCycles / kGpSimdElementsPerCycle;
      break;
    }
    default:
      break;
  }
  const double compute_ns = std::max(min_cycles, extra_cycles + static_cast<double>(elements) * cycles_per_element / kGpSimdElementsPerCycle) / t.gpsimd_clock_ghz;
  const double memory_ns = static_cast<double>(bytes) / (t.dma_bytes_per_ns_per_engine * kGpSimdDmaEngines);
  const double ns = kGpSimdOverheadCycles / t.gpsimd_clock_ghz + std::max(compute_ns, memory_ns);
  return {ns, ns, bytes, flops};
}

// A compute engine's instruction occupies its stream for busy_ns; the engines waiting on it see
// its semaphore increment semaphore_handoff_ns later. (A DMA's measured end-to-end time already
// includes its completion signal.)
InstructionTiming SignalledBySemaphore(const TargetSpec& t, InstructionTiming timing) {
  timing.latency_ns += t.semaphore_handoff_ns;
  return timing;
}

InstructionTiming HostCallbackTiming(const Program& p, const HostCallback& h) {
  int64_t bytes = 0;
  for (const HbmAP& ap : h.srcs) bytes += HbmBytes(p, ap);
  for (const HbmAP& ap : h.dsts) bytes += HbmBytes(p, ap);
  const double ns = kHostCallbackRoundTripNs + static_cast<double>(bytes) / kHostLinkBytesPerNs;
  return {ns, ns, bytes, 0};
}

InstructionTiming ComputeTiming(const Program& program, const Instruction& inst) {
  const TargetSpec& t = *program.target;
  switch (inst.opcode) {
    case Opcode::kMatmul:
    case Opcode::kTranspose:
      return TensorTiming(program, inst);
    case Opcode::kActivation: {
      const auto& a = std::get<Activation>(inst.operands);
      const double cycles = t.instruction_fixed_cycles + std::max(kMinCycles, static_cast<double>(a.src.free_size()));
      const double ns = cycles / t.scalar_clock_ghz;
      return {ns, ns, TileBytes(a.src) + TileBytes(a.dst), 0};
    }
    case Opcode::kActivationReduce: {
      const auto& a = std::get<ActivationReduce>(inst.operands);
      const double sum_cycles = a.has_sum() ? kActivationReduceCycles : 0;
      const double cycles = t.instruction_fixed_cycles + std::max(kMinCycles, static_cast<double>(a.src.free_size())) + sum_cycles;
      const double ns = cycles / t.scalar_clock_ghz;
      return {ns, ns, TileBytes(a.src) + TileBytes(a.dst) + (a.has_sum() ? TileBytes(a.dst_sum) : 0), 0};
    }
    case Opcode::kTensorTensor: case Opcode::kTensorScalar: case Opcode::kTensorReduce:
    case Opcode::kTensorCopy: case Opcode::kTensorTernary: case Opcode::kTensorUnary:
    case Opcode::kScalarTensorTensor: case Opcode::kBnStats: case Opcode::kBnAggr: {
      int64_t bytes = 0;
      const double ns = (t.instruction_fixed_cycles + VectorCycles(t, inst, &bytes)) / t.vector_clock_ghz;
      return {ns, ns, bytes, 0};
    }
    case Opcode::kHostCallback:
      return HostCallbackTiming(program, std::get<HostCallback>(inst.operands));
    default:
      return GpSimdTiming(program, inst);
  }
}

}  // namespace

bool RunsAtFp8Rate(const Matmul& m) { return IsFp8(m.stationary.dtype) && IsFp8(m.moving.dtype); }

InstructionTiming EstimateTiming(Machine& machine, const Instruction& inst, double start_ns) {
  if (inst.opcode == Opcode::kDmaCopy) return DmaTiming(machine, std::get<DmaCopy>(inst.operands), start_ns);
  return SignalledBySemaphore(*machine.program.target, ComputeTiming(machine.program, inst));
}

double CrossCoreSemaphoreNs() { return kCrossCoreSemaphoreExtraNs; }

InstructionTiming EstimateControlTiming(const Program& program, const BlockExit& exit) {
  const bool reads = exit.op == ControlOp::kBranch || exit.op == ControlOp::kSwitch;
  const double ns = exit.op == ControlOp::kEnd ? 0 : kBlockBarrierNs + (reads ? kSelectorReadNs : 0);
  const int64_t bytes = reads ? DTypeSize(program.tensors[exit.selector.tensor].dtype) : 0;
  return {ns, ns, bytes, 0};
}

}  // namespace trn::sim
