// Runs a program's streams on a Machine, event by event: each stream in order, every
// instruction starting once its stream is free and its waits are met, the runnable instruction
// with the earliest start going next. Fills the profile; reports deadlocks.
#pragma once

#include "machine.h"
#include "program.h"
#include "runtime.h"

namespace trn::sim {

// Blocks run one after another from block 0, each to completion (all streams), then its exit
// picks the next one (docs/program-format.md "Blocks and control flow").
Status RunStreams(Machine& machine, const ExecuteOptions& options, ExecutionProfile* profile);

// Entering one block more often than this in one execution is an error (a runaway loop), unless
// ExecuteOptions or TRN_MAX_LOOP_ITERATIONS says otherwise.
constexpr int64_t kDefaultMaxBlockEntries = 10'000'000;


}  // namespace trn::sim
