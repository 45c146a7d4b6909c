// Per-generation hardware constants: the one table shared by the simulator, its timing model, the
// plugin (device counts, HBM capacity) and the compiler (through jax_trn._native.target_spec()).
// Figures and their sources: shared/design/neuroncore.md; "est." marks an estimate.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace trn::sim {

struct TargetSpec {
  const char* name;                 // "trn1", "trn2", "trn3"
  const char* core_version;         // "NeuronCore-v2" ...
  int physical_cores_per_chip;
  int default_lnc;                  // physical cores per logical device by default
  int partitions;                   // SBUF/PSUM partitions (128)
  int64_t sbuf_bytes_per_partition; // usable
  int psum_banks;                   // per partition
  int64_t psum_bank_bytes;          // per partition per bank
  int matmul_moving_free_max;       // moving tile free size limit
  int matmul_stationary_free_max;   // stationary free size limit (output partitions)
  double tensor_clock_ghz;
  double vector_clock_ghz;
  double scalar_clock_ghz;
  double gpsimd_clock_ghz;
  int64_t hbm_bytes_per_chip;
  double hbm_bytes_per_ns_per_chip;
  int dma_engines_per_core;
  int dma_queues;                   // DMA instruction queues a program may use (streams DMA0..)
  double dma_bytes_per_ns_per_engine;  // end to end, fixed cost included; x engines = per core cap
  double matmul_fp8_speedup;        // fp8 x fp8 matmul rate / bf16 rate
  double matmul_fp32_slowdown;      // bf16 matmul rate / fp32 rate
  double instruction_fixed_cycles;  // ScalarE/VectorE cost of an instruction beyond max(64, N)
  double semaphore_handoff_ns;      // completion to a waiting engine seeing the semaphore (est.)
  double chip_link_bytes_per_ns;    // chip-to-chip NeuronLink
};

// Returns nullptr for an unknown name.
__attribute__((visibility("default"))) const TargetSpec* FindTarget(std::string_view name);

// Every target's name, in table order ("trn1", "trn2", "trn3").
__attribute__((visibility("default"))) std::vector<std::string> TargetNames();

// "trn1, trn2, trn3": for error messages naming the known targets.
__attribute__((visibility("default"))) std::string KnownTargets();

// One figure of a target, by the name the compiler reads it under.
struct TargetFigure {
  const char* name;
  std::variant<int64_t, double, const char*> value;
};

// Every field of `target`, in declaration order: the target description the compiler receives
// (compiler_bridge.cc) and jax_trn._native.target_spec() returns, built from this one list.
__attribute__((visibility("default"))) std::vector<TargetFigure> TargetFigures(
    const TargetSpec& target);

}  // namespace trn::sim
