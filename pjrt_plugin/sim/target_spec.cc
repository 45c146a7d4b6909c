#include "target_spec.h"

namespace trn::sim {
namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kGiB = 1024 * 1024 * 1024;

// Clocks, SBUF, HBM, DMA rates and links: neuroncore.md "Generations" and "DMA" tables; every
// timing figure, its source or the reasoning of an estimate: docs/timing-model.md.
// dma_bytes_per_ns_per_engine: 32 KiB on one engine in 1,416 ns on trn2 (NKI DMA overview,
// example 1) is 23 B/ns with the fixed cost inside; x 16 engines = 272 / 368 / 528 GB/s per core
// (NKI DMA bandwidth guide). matmul_fp8_speedup: 158 fp8 vs 79 bf16 TFLOPS per trn2 core; trn1
// has no fp8 rate; trn3's 4x is MXFP8 (scaled formats, not in the ISA): plain fp8 is taken at 2x.
// instruction_fixed_cycles: a dependent chain of 1-element ScalarE ops costs 222 ns each on
// NeuronCore-v3 (189 ns on v2; NKI performance guide, Opt #5a) = 266 engine cycles = 202 + the
// 64-cycle MIN_II; v4 est. as v3. semaphore_handoff_ns est.: one semaphore update crossing
// engines, ~64 cycles of the receiving sequencer (MIN_II) at its ~1.2 (v3/v4) / 1.4 (v2) GHz.
constexpr TargetSpec kTargets[] = {
    {"trn1", "NeuronCore-v2", 2, 1, 128, 192 * kKiB, 8, 2 * kKiB, 512, 128,
     2.8, 1.12, 1.4, 1.4, 32 * kGiB, 820.0, 16, 16, 17.0, 1.0, 4.0, 202.0, 46.0, 384.0},
    // trn2: 224 KiB per partition of which ~207.7 KiB is usable by programs.
    {"trn2", "NeuronCore-v3", 8, 2, 128, 207 * kKiB + 716, 8, 2 * kKiB, 512, 128,
     2.4, 0.96, 1.2, 1.2, 96 * kGiB, 2900.0, 16, 16, 23.0, 2.0, 4.0, 202.0, 53.0, 1280.0},
    // trn3: 32 MiB SBUF = 256 KiB per partition; moving free size up to 4096 on NeuronCore-v4.
    {"trn3", "NeuronCore-v4", 8, 1, 128, 256 * kKiB, 8, 2 * kKiB, 4096, 128,
     2.4, 1.2, 1.2, 1.2, 144 * kGiB, 4900.0, 16, 16, 33.0, 2.0, 4.0, 202.0, 53.0, 2560.0},
};

}  // namespace

const TargetSpec* FindTarget(std::string_view name) {
  for (const TargetSpec& t : kTargets) {
    if (name == t.name) return &t;
  }
  return nullptr;
}

std::vector<std::string> TargetNames() {
  std::vector<std::string> names;
  for (const TargetSpec& t : kTargets) names.emplace_back(t.name);
  return names;
}

std::string KnownTargets() {
  std::string text;
  for (const TargetSpec& t : kTargets) text += (text.empty() ? "" : ", ") + std::string(t.name);
  return text;
}

std::vector<TargetFigure> TargetFigures(const TargetSpec& t) {
  return {
      {"name", t.name},
      {"core_version", t.core_version},
      {"physical_cores_per_chip", int64_t{t.physical_cores_per_chip}},
      {"default_lnc", int64_t{t.default_lnc}},
      {"partitions", int64_t{t.partitions}},
      {"sbuf_bytes_per_partition", t.sbuf_bytes_per_partition},
      {"psum_banks", int64_t{t.psum_banks}},
      {"psum_bank_bytes", t.psum_bank_bytes},
      {"matmul_moving_free_max", int64_t{t.matmul_moving_free_max}},
      {"matmul_stationary_free_max", int64_t{t.matmul_stationary_free_max}},
      {"tensor_clock_ghz", t.tensor_clock_ghz},
      {"vector_clock_ghz", t.vector_clock_ghz},
      {"scalar_clock_ghz", t.scalar_clock_ghz},
      {"gpsimd_clock_ghz", t.gpsimd_clock_ghz},
      {"hbm_bytes_per_chip", t.hbm_bytes_per_chip},
      {"hbm_bytes_per_ns_per_chip", t.hbm_bytes_per_ns_per_chip},
      {"dma_engines_per_core", int64_t{t.dma_engines_per_core}},
      {"dma_queues", int64_t{t.dma_queues}},
      {"dma_bytes_per_ns_per_engine", t.dma_bytes_per_ns_per_engine},
      {"matmul_fp8_speedup", t.matmul_fp8_speedup},
      {"matmul_fp32_slowdown", t.matmul_fp32_slowdown},
      {"instruction_fixed_cycles", t.instruction_fixed_cycles},
      {"semaphore_handoff_ns", t.semaphore_handoff_ns},
      {"chip_link_bytes_per_ns", t.chip_link_bytes_per_ns},
  };
}

}  // namespace trn::sim
