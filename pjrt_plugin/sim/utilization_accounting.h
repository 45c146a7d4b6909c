// What one executed instruction counts toward a profile's utilization figures: MFU, HFU and MBU
// as AWS's Neuron Explorer defines them (docs/profiling.md). Model FLOPs are the matmuls'
// (InstructionTiming::flops of a matmul); hardware FLOPs add the TensorE transposes; FLOPs at
// the fp8 rate count half against the bf16 peak; MBU counts the bytes that cross HBM.
#pragma once

#include <cstdint>

#include "program.h"
#include "timing_model.h"

namespace trn::sim {

struct UtilizationCounts {
  int64_t hbm_bytes = 0;         // read from HBM plus written to HBM
  int64_t transpose_flops = 0;   // TensorE FLOPs that only move data (HFU, not MFU)
  int64_t fp8_matmul_flops = 0;  // matmul FLOPs that ran at the fp8 rate
};

UtilizationCounts CountUtilization(const Instruction& inst, const InstructionTiming& timing);

}  // namespace trn::sim
