// Runs a program's streams on a Machine, event by event: each stream in order, every
// instruction starting once its stream is free and its waits are met, the runnable instruction
// with the earliest start going next. Fills the profile; reports deadlocks.
#pragma once

#include "machine.h"
#include "program.h"
#include "runtime.h"

namespace trn::sim {

Status RunStreams(Machine& machine, const ExecuteOptions& options, ExecutionProfile* profile);

// "DVE instruction 3 (tensor_tensor; stablehlo.add \"jit(f)/add\" at f.py:3:4)".
std::string DescribeInstruction(const Program& program, int stream, size_t index);

}  // namespace trn::sim
