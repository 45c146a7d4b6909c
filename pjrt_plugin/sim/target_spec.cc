#include "target_spec.h"

namespace trn::sim {
namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kGiB = 1024 * 1024 * 1024;

// Clocks, SBUF, HBM, DMA rates and links: neuroncore.md "Generations" and "DMA" tables.
// dma_fixed_latency_ns: neuroncore.md gives ~1.3 us trigger-to-start for a DMA; kept per target.
constexpr TargetSpec kTargets[] = {
    {"trn1", "NeuronCore-v2", 2, 1, 128, 192 * kKiB, 8, 2 * kKiB, 512, 128,
     2.8, 1.12, 1.4, 1.4, 32 * kGiB, 820.0, 16, 16, 17.0, 1300.0, 384.0},
    // trn2: 224 KiB per partition of which ~207.7 KiB is usable by programs.
    {"trn2", "NeuronCore-v3", 8, 2, 128, 207 * kKiB + 716, 8, 2 * kKiB, 512, 128,
     2.4, 0.96, 1.2, 1.2, 96 * kGiB, 2900.0, 16, 16, 23.0, 1300.0, 1280.0},
    // trn3: 32 MiB SBUF = 256 KiB per partition; moving free size up to 4096 on NeuronCore-v4.
    {"trn3", "NeuronCore-v4", 8, 1, 128, 256 * kKiB, 8, 2 * kKiB, 4096, 128,
     2.4, 1.2, 1.2, 1.2, 144 * kGiB, 4900.0, 16, 16, 33.0, 1300.0, 2560.0},
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
      {"dma_fixed_latency_ns", t.dma_fixed_latency_ns},
      {"chip_link_bytes_per_ns", t.chip_link_bytes_per_ns},
  };
}

}  // namespace trn::sim
