// Writes captured executions as a serialized TSL XSpace (tensorflow.profiler.XSpace, the
// protobuf jax.profiler.trace saves as *.xplane.pb and TensorBoard / Perfetto read), by hand in
// the protobuf wire format (protobuf_wire.h):
// - a plane per trn device, "/device:CUSTOM:<id>" (TSL's name for a device that is neither GPU
//   nor TPU, which its trace viewers show), with the device's name ("TRN_0"), its target and a
//   note that the times are the timing model's as stats;
// - a line per engine and DMA queue that ran something ("PE", "ACT", "DVE", "POOL", "SP",
//   "DMA0".."DMA15", in that order), each instruction an event named after its op (JAX's name,
//   "jit(f)/dot_general") lasting its modeled busy time, with the op's StableHLO op, source
//   line, opcode and lowering, and its bytes, HBM bytes and FLOPs as stats;
// - a line "Executions": one event per execution (the module's name) lasting its device time.
// Times are placed on one device time axis (docs/profiling.md): an execution starts at the host
// time its device started it, or when the device's previous execution ended in modeled time
// if that is later (a device runs one program at a time).
#pragma once

#include <string>
#include <vector>

#include "trace_capture.h"

namespace trn::pjrt {

std::string EncodeXSpace(const std::vector<CapturedExecution>& executions);

}  // namespace trn::pjrt
