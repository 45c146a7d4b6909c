#include "executor.h"

#include <algorithm>
#include <limits>

#include "engines.h"
#include "timing_model.h"

namespace trn::sim {
namespace {

void Run(Machine& machine, const Instruction& inst) {
  switch (inst.opcode) {
    case Opcode::kDmaCopy: return RunDmaCopy(machine, std::get<DmaCopy>(inst.operands));
    case Opcode::kMatmul: return RunMatmul(machine, std::get<Matmul>(inst.operands));
    case Opcode::kTranspose: return RunTranspose(machine, std::get<Transpose>(inst.operands));
    case Opcode::kActivation: return RunActivation(machine, std::get<Activation>(inst.operands));
    case Opcode::kTensorTensor: case Opcode::kTensorScalar: case Opcode::kTensorReduce:
    case Opcode::kTensorCopy: case Opcode::kTensorTernary: case Opcode::kTensorUnary:
      return RunVectorInstruction(machine, inst);
    default:
      return RunGpSimdInstruction(machine, inst);
  }
}

struct StreamState {
  size_t next = 0;                 // index of the next instruction
  double free_ns = 0;              // when the stream can start its next instruction
  std::vector<double> done_ns;     // completion time of each finished instruction
};

std::string DeadlockReport(const Program& program, const std::array<StreamState, kNumStreams>& state) {
  std::string report = "deadlock: no stream can make progress;";
  for (int s = 0; s < kNumStreams; ++s) {
    const auto& insts = program.streams[s];
    if (state[s].next >= insts.size()) continue;
    const Instruction& inst = insts[state[s].next];
    report += ' ';
    report += DescribeInstruction(program, s, state[s].next);
    report += " waits for";
    for (const Wait& w : inst.waits) {
      if (state[w.stream].done_ns.size() < w.count) {
        report += ' ';
        report += StreamName(w.stream) + ">=" + std::to_string(w.count) + " (has " +
                  std::to_string(state[w.stream].done_ns.size()) + " of " +
                  std::to_string(program.streams[w.stream].size()) + ")";
      }
    }
    report += ";";
  }
  report.pop_back();
  return report;
}

}  // namespace

std::string DescribeInstruction(const Program& program, int stream, size_t index) {
  const Instruction& inst = program.streams[stream][index];
  std::string text = StreamName(stream) + " instruction " + std::to_string(index) + " (" +
                     OpcodeName(static_cast<uint16_t>(inst.opcode));
  const DebugInfo& debug = program.debug[inst.debug_id];
  if (!debug.op.empty() || !debug.name.empty()) text += "; " + debug.op + " \"" + debug.name + "\"";
  if (!debug.location.empty()) text += " at " + debug.location;
  return text + ")";
}

Status RunStreams(Machine& machine, const ExecuteOptions& options, ExecutionProfile* profile) {
  const Program& program = machine.program;
  std::array<StreamState, kNumStreams> state;
  size_t remaining = 0;
  for (int s = 0; s < kNumStreams; ++s) {
    remaining += program.streams[s].size();
    state[s].done_ns.reserve(program.streams[s].size());
  }
  profile->stream_busy_ns.assign(kNumStreams, 0.0);
  profile->stream_instructions.assign(kNumStreams, 0);
  while (remaining > 0) {
    int best = -1;
    double best_start = std::numeric_limits<double>::infinity();
    for (int s = 0; s < kNumStreams; ++s) {
      const auto& insts = program.streams[s];
      if (state[s].next >= insts.size()) continue;
      double start = state[s].free_ns;
      bool runnable = true;
      for (const Wait& w : insts[state[s].next].waits) {
        if (w.count == 0) continue;
        const auto& done = state[w.stream].done_ns;
        if (done.size() < w.count) {
          runnable = false;
          break;
        }
        start = std::max(start, done[w.count - 1]);
      }
      if (runnable && start < best_start) {
        best = s;
        best_start = start;
      }
    }
    if (best < 0) return FailedPrecondition(DeadlockReport(program, state));
    StreamState& stream = state[best];
    const Instruction& inst = program.streams[best][stream.next];
    Run(machine, inst);
    const InstructionTiming timing = EstimateTiming(program, inst);
    const double end = best_start + timing.latency_ns;
    stream.free_ns = best_start + timing.busy_ns;
    // Completions of one stream are in order even when its instructions overlap (DMA queues).
    stream.done_ns.push_back(std::max(end, stream.done_ns.empty() ? 0.0 : stream.done_ns.back()));
    profile->device_time_ns = std::max(profile->device_time_ns, stream.done_ns.back());
    profile->stream_busy_ns[best] += timing.busy_ns;
    profile->stream_instructions[best] += 1;
    if (inst.opcode == Opcode::kMatmul) profile->matmul_flops += timing.flops;
    if (options.record_timeline) {
      profile->timeline.push_back({static_cast<uint8_t>(best), static_cast<uint16_t>(inst.opcode), inst.debug_id,
                                   best_start, stream.done_ns.back(), timing.bytes, timing.flops});
    }
    ++stream.next;
    --remaining;
  }
  return Status::Ok();
}

}  // namespace trn::sim
