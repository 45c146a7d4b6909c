// How long the chip would take for one instruction (shared/design/neuroncore.md). Every estimate
// is a named constant in timing_model.cc with its source or reasoning beside it.
#pragma once

#include <cstdint>

#include "machine.h"
#include "program.h"

namespace trn::sim {

struct InstructionTiming {
  double busy_ns;     // how long the instruction occupies its stream
  double latency_ns;  // start to completion (semaphore increment); >= busy_ns
  int64_t bytes;      // moved (DMA) or touched (compute engines)
  int64_t flops;      // matmul family: 2*M*N*K
};

// `inst` starting at `start_ns` on `machine`: DMA transfers share the core's and the chip's
// bandwidth with the transfers scheduled before them (dma_bandwidth.h).
InstructionTiming EstimateTiming(Machine& machine, const Instruction& inst, double start_ns);

// Whether a matmul runs at the generation's fp8 rate (both operands fp8).
bool RunsAtFp8Rate(const Matmul& m);

// How much later than an engine of its own core an engine of the other physical core (an LNC=2
// program) sees an instruction's semaphore increment.
double CrossCoreSemaphoreNs();

// The cost of leaving a block: the barrier (every engine reports to SP, SP releases them) and,
// for branch/switch, SP's read of the selector from HBM. Charged from the moment the block's
// last stream finished; the next block starts after latency_ns.
InstructionTiming EstimateControlTiming(const Program& program, const BlockExit& exit);

}  // namespace trn::sim
