#include "executor.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>

#include "elementwise.h"

#include "collectives.h"
#include "engines.h"
#include "host_callback.h"
#include "timing_model.h"
#include "utilization_accounting.h"

namespace trn::sim {
namespace {

void Run(Machine& machine, const Instruction& inst) {
  switch (inst.opcode) {
    case Opcode::kDmaCopy: return RunDmaCopy(machine, std::get<DmaCopy>(inst.operands));
    case Opcode::kMatmul: return RunMatmul(machine, std::get<Matmul>(inst.operands));
    case Opcode::kTranspose: return RunTranspose(machine, std::get<Transpose>(inst.operands));
    case Opcode::kActivation: return RunActivation(machine, std::get<Activation>(inst.operands));
    case Opcode::kActivationReduce: return RunActivationReduce(machine, std::get<ActivationReduce>(inst.operands));
    case Opcode::kTensorTensor: case Opcode::kTensorScalar: case Opcode::kTensorReduce:
    case Opcode::kTensorCopy: case Opcode::kTensorTernary: case Opcode::kTensorUnary:
    case Opcode::kScalarTensorTensor: case Opcode::kBnStats: case Opcode::kBnAggr:
      return RunVectorInstruction(machine, inst);
    default:
      return RunGpSimdInstruction(machine, inst);
  }
}

// A stream's cursor over its stored instructions and counted loops (never expanded; loops may
// nest), with its semaphore: the completion time of each instruction it has executed.
struct StreamState {
  size_t next = 0;                 // stored index of the next instruction
  size_t next_loop = 0;            // the first of the stream's loops not yet entered
  int depth = 0;                   // how many loops hold the next instruction
  std::array<size_t, kMaxLoopDepth> active{};       // those loops (indices), outermost first
  std::array<int64_t, kMaxLoopDepth> iteration{};   // and each one's iteration
  double free_ns = 0;              // when the stream can start its next instruction
  std::vector<double> done_ns;     // completion time of each finished instruction

  // Enters the loops whose bodies start at `next` (an enclosing loop is listed first).
  void Enter(const std::vector<StreamLoop>& loops) {
    while (next_loop < loops.size() && loops[next_loop].first == next) {
      active[depth] = next_loop++;
      iteration[depth++] = 0;
    }
  }
  void Advance(const std::vector<StreamLoop>& loops) {
    ++next;
    while (depth > 0) {
      const StreamLoop& loop = loops[active[depth - 1]];
      if (next != loop.first + loop.length) break;
      if (iteration[depth - 1] + 1 < loop.count) {
        ++iteration[depth - 1];
        next = loop.first;
        next_loop = active[depth - 1] + 1;  // its nested loops run again
        break;
      }
      --depth;
    }
    Enter(loops);
  }
  // The steps of the next instruction in the loop at `level` (0: outermost).
  const InstructionSteps& Steps(const std::vector<StreamLoop>& loops, int level) const {
    const StreamLoop& loop = loops[active[level]];
    return loop.body[next - loop.first];
  }
  // The count the next instruction's k-th wait needs at these iterations.
  uint64_t WaitCount(const std::vector<StreamLoop>& loops, const Instruction& inst, size_t k) const {
    uint64_t count = inst.waits[k].count;
    for (int d = 0; d < depth; ++d) count += static_cast<uint64_t>(Steps(loops, d).wait_steps[k]) * iteration[d];
    return count;
  }
  // How many times the next instruction ran before in this block entry (the iterations in
  // mixed radix, the outermost most significant).
  int64_t Run(const std::vector<StreamLoop>& loops) const {
    int64_t run = 0;
    for (int d = 0; d < depth; ++d) run = run * loops[active[d]].count + iteration[d];
    return run;
  }
  // The next instruction as these iterations run it: its HBM offsets and bases moved.
  bool Moved(const std::vector<StreamLoop>& loops, const Instruction& stored, Instruction& out) const {
    bool moved = false;
    for (int d = 0; d < depth; ++d) {
      const InstructionSteps& steps = Steps(loops, d);
      if (iteration[d] == 0 || !steps.moves()) continue;
      out = AtIteration(moved ? out : stored, steps, iteration[d]);
      moved = true;
    }
    return moved;
  }
};

std::string DeadlockReport(const Program& program, size_t block_index,
                           const std::array<StreamState, kMaxStreams>& state) {
  const Block& block = program.blocks[block_index];
  std::string report = "deadlock: no stream can make progress";
  if (program.blocks.size() > 1) report += " in block " + std::to_string(block_index);
  report += ";";
  for (int s = 0; s < program.num_streams(); ++s) {
    const auto& insts = block.streams[s];
    if (state[s].next >= insts.size()) continue;
    const Instruction& inst = insts[state[s].next];
    report += ' ';
    report += DescribeInstruction(program, block_index, s, state[s].next);
    if (state[s].depth > 0) {
      report += " at loop iteration ";
      for (int d = 0; d < state[s].depth; ++d) report += (d ? "," : "") + std::to_string(state[s].iteration[d]);
    }
    report += " waits for";
    for (size_t k = 0; k < inst.waits.size(); ++k) {
      const Wait& w = inst.waits[k];
      const uint64_t count = state[s].WaitCount(block.loops[s], inst, k);
      if (state[w.stream].done_ns.size() < count) {
        report += ' ';
        report += StreamName(w.stream) + ">=" + std::to_string(count) + " (has " +
                  std::to_string(state[w.stream].done_ns.size()) + " of " +
                  std::to_string(block.ExecutedCount(w.stream)) + ")";
      }
    }
    report += ";";
  }
  report.pop_back();
  return report;
}


int64_t BlockEntryCap(const ExecuteOptions& options) {
  if (options.max_block_entries > 0) return options.max_block_entries;
  if (const char* env = std::getenv("TRN_MAX_LOOP_ITERATIONS"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const long long value = std::strtoll(env, &end, 10);
    if (end != env && *end == '\0' && value > 0) return value;
  }
  return kDefaultMaxBlockEntries;
}

// How often a long block polls ExecuteOptions::cancelled (blocks poll on entry too).
constexpr size_t kInstructionsPerCancelCheck = 4096;

bool Cancelled(const ExecuteOptions& options) { return options.cancelled && options.cancelled(); }

Status CancelledIn(size_t block_index) {
  return Status(StatusCode::kCancelled,
                "the execution was cancelled in block " + std::to_string(block_index));
}

// Runs one block's streams to completion from `start_ns` (every stream free then, every
// semaphore at 0). Returns the time the last stream finished.
StatusOr<double> RunBlock(Machine& machine, size_t block_index, double start_ns,
                          const ExecuteOptions& options, ExecutionProfile* profile) {
  const Program& program = machine.program;
  const Block& block = program.blocks[block_index];
  std::array<StreamState, kMaxStreams> state;
  const int num_streams = program.num_streams();
  // A wait on the other physical core's semaphore (an LNC=2 program) sees it this much later.
  const double cross_core_ns = CrossCoreSemaphoreNs();
  size_t remaining = 0;
  for (int s = 0; s < num_streams; ++s) {
    const size_t executed = static_cast<size_t>(block.ExecutedCount(s));
    remaining += executed;
    state[s].free_ns = start_ns;
    state[s].done_ns.reserve(executed);
    state[s].Enter(block.loops[s]);
  }
  double finish_ns = start_ns;
  while (remaining > 0) {
    if (remaining % kInstructionsPerCancelCheck == 0 && Cancelled(options)) {
      return CancelledIn(block_index);
    }
    int best = -1;
    double best_start = std::numeric_limits<double>::infinity();
    for (int s = 0; s < num_streams; ++s) {
      const auto& insts = block.streams[s];
      if (state[s].next >= insts.size()) continue;
      double start = state[s].free_ns;
      const int core = CoreOfStream(s);
      bool runnable = true;
      const Instruction& next = insts[state[s].next];
      for (size_t k = 0; k < next.waits.size(); ++k) {
        const uint64_t count = state[s].WaitCount(block.loops[s], next, k);
        if (count == 0) continue;
        const auto& done = state[next.waits[k].stream].done_ns;
        if (done.size() < count) {
          runnable = false;
          break;
        }
        start = std::max(start, done[count - 1] + (CoreOfStream(next.waits[k].stream) == core ? 0 : cross_core_ns));
      }
      if (runnable && start < best_start) {
        best = s;
        best_start = start;
      }
    }
    if (best < 0) return FailedPrecondition(DeadlockReport(program, block_index, state));
    StreamState& stream = state[best];
    const Instruction& stored = block.streams[best][stream.next];
    // A loop iteration past the first runs with its HBM offsets (and iota bases) moved (a copy; waits unused here).
    Instruction concrete;
    const bool moved = stream.depth > 0 && stream.Moved(block.loops[best], stored, concrete);
    const Instruction& inst = moved ? concrete : stored;
    machine.core = CoreOfStream(best);
    InstructionTiming timing;
    InstructionRecord::Collective collective_stats;
    if (inst.opcode == Opcode::kCollective) {
      // Meets the other cores: its data and its time depend on theirs (collectives.h).
      StatusOr<InstructionTiming> collective = RunCollective(machine, inst, best_start, options, &collective_stats);
      if (!collective.ok()) return collective.status();
      timing = *collective;
    } else if (inst.opcode == Opcode::kHostCallback) {
      TRN_RETURN_IF_ERROR(RunHostCallback(machine, std::get<HostCallback>(inst.operands), options.host_callback,
                                          DescribeInstruction(program, block_index, best, stream.next)));
      timing = EstimateTiming(machine, inst, best_start);
    } else {
      Run(machine, inst);
      timing = EstimateTiming(machine, inst, best_start);
    }
    const double end = best_start + timing.latency_ns;
    stream.free_ns = best_start + timing.busy_ns;
    // Completions of one stream are in order even when its instructions overlap (DMA queues).
    stream.done_ns.push_back(std::max(end, stream.done_ns.empty() ? start_ns : stream.done_ns.back()));
    finish_ns = std::max({finish_ns, stream.done_ns.back(), stream.free_ns});
    profile->stream_busy_ns[best] += timing.busy_ns;
    profile->stream_instructions[best] += 1;
    if (inst.opcode == Opcode::kMatmul) profile->matmul_flops += timing.flops;
    const UtilizationCounts counts = CountUtilization(inst, timing);
    profile->fp8_matmul_flops += counts.fp8_matmul_flops;
    profile->transpose_flops += counts.transpose_flops;
    profile->hbm_bytes += counts.hbm_bytes;
    if (options.record_timeline) {
      InstructionRecord record{static_cast<uint8_t>(best), static_cast<uint16_t>(inst.opcode), inst.debug_id,
                               best_start, stream.done_ns.back(), timing.bytes, timing.flops,
                               stream.free_ns, static_cast<int64_t>(stream.next),
                               static_cast<int32_t>(block_index)};
      record.iteration = stream.Run(block.loops[best]);
      record.hbm_bytes = counts.hbm_bytes;
      record.fp8 = counts.fp8_matmul_flops > 0;
      record.collective = collective_stats;
      profile->timeline.push_back(record);
    }
    stream.Advance(block.loops[best]);
    --remaining;
  }
  // The device time is the last completion; a stream still busy past it (a DMA queue's issue
  // gap) does not lengthen a program that ends here.
  double last_done = start_ns;
  for (const StreamState& s : state) {
    if (!s.done_ns.empty()) last_done = std::max(last_done, s.done_ns.back());
  }
  profile->device_time_ns = std::max(profile->device_time_ns, last_done);
  return finish_ns;
}

// The selector of a branch/switch exit (pred or an integer; the loader checked), read in its
// compute domain: *is_unsigned says whether the bits are a u64.
int64_t ReadSelector(Machine& machine, const HbmAP& ap, bool* is_unsigned) {
  const StridedView view = machine.View(ap);
  const Domain domain = ComputeDomain(view.dtype);
  const Values v = Gather(view, domain);
  *is_unsigned = domain == Domain::kU64;
  return *is_unsigned ? static_cast<int64_t>(v.u64[0]) : v.i64[0];
}

}  // namespace


Status RunStreams(Machine& machine, const ExecuteOptions& options, ExecutionProfile* profile) {
  const Program& program = machine.program;
  profile->stream_busy_ns.assign(program.num_streams(), 0.0);
  profile->stream_instructions.assign(program.num_streams(), 0);
  const int64_t cap = BlockEntryCap(options);
  std::vector<int64_t> entries(program.blocks.size(), 0);
  size_t current = 0;
  double now = 0;
  while (true) {
    if (++entries[current] > cap) {
      const BlockExit& exit = program.blocks[current].exit;
      return ResourceExhausted(
          "block " + std::to_string(current) + " was entered more than " + std::to_string(cap) +
          " times: a loop runs past the iteration cap (set TRN_MAX_LOOP_ITERATIONS to raise it); the block ends in SP " +
          OpcodeName(static_cast<uint16_t>(exit.op)) + (exit.op == ControlOp::kEnd ? "" : DescribeDebug(program, exit.debug_id)));
    }
    if (Cancelled(options)) return CancelledIn(current);
    auto finished = RunBlock(machine, current, now, options, profile);
    if (!finished.ok()) return finished.status();
    const BlockExit& exit = program.blocks[current].exit;
    if (exit.op == ControlOp::kEnd) return Status::Ok();
    size_t next = 0;
    switch (exit.op) {
      case ControlOp::kJump:
        next = exit.targets[0];
        break;
      case ControlOp::kBranch: {
        bool is_unsigned = false;
        next = exit.targets[ReadSelector(machine, exit.selector, &is_unsigned) != 0 ? 0 : 1];
        break;
      }
      case ControlOp::kSwitch: {
        // XLA's case: an index outside [0, n) runs the last branch. Unsigned indices compare as
        // unsigned (a u64 above 2^63 is out of range, not negative).
        bool is_unsigned = false;
        const int64_t index = ReadSelector(machine, exit.selector, &is_unsigned);
        const int64_t n = static_cast<int64_t>(exit.targets.size());
        const bool in_range = is_unsigned ? static_cast<uint64_t>(index) < static_cast<uint64_t>(n) : index >= 0 && index < n;
        next = exit.targets[in_range ? index : n - 1];
        break;
      }
      case ControlOp::kEnd:
        break;
    }
    const InstructionTiming timing = EstimateControlTiming(program, exit);
    profile->stream_busy_ns[kStreamSP] += timing.busy_ns;
    profile->stream_instructions[kStreamSP] += 1;
    profile->hbm_bytes += timing.bytes;  // a branch/switch selector read from HBM
    if (options.record_timeline) {
      profile->timeline.push_back({static_cast<uint8_t>(kStreamSP), static_cast<uint16_t>(exit.op), exit.debug_id,
                                   finished.value(), finished.value() + timing.latency_ns, timing.bytes, 0,
                                   finished.value() + timing.busy_ns, -1, static_cast<int32_t>(current),
                                   timing.bytes});
    }
    now = finished.value() + timing.latency_ns;
    profile->device_time_ns = std::max(profile->device_time_ns, now);
    current = next;
  }
}

}  // namespace trn::sim
