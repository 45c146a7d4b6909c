// The runtime's public face, used by the PJRT plugin and the Python bindings: load a program
// (validated, never trusted) and execute it on one simulated NeuronCore, bit-for-bit, with the
// timing model's account of how long the chip would take.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dtype.h"
#include "status.h"
#include "target_spec.h"

// Symbols the Python bindings (a separate module linking libpjrt_trn.so) may call.
#define TRN_API __attribute__((visibility("default")))

namespace trn::sim {

struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  int64_t byte_size;  // dense row-major
  // Donation: for a parameter, the output that reuses its buffer; for an output, the parameter
  // whose buffer it reuses (it starts holding that parameter's bytes); -1 for neither.
  int32_t alias = -1;
};

struct DebugInfo {
  std::string op;        // "stablehlo.dot_general"
  std::string name;      // "jit(f)/dot_general"
  std::string location;  // "file.py:36:15"
  std::string lowering;  // "native", "gpsimd", "fused", "empty" or "" (format version 3 on)
  std::string rule;      // the compiler's lowering rule, "matmul.lower_dot_general" (may be "")
};

class Program;  // defined in program.h; opaque to users of the runtime
class TemporaryPool;  // temporary_pool.h
class CollectiveSession;  // collectives.h

// A loaded program: immutable, shareable between executions and threads.
class TRN_API LoadedProgram {
 public:
  // Parses and validates `bytes` for the target. Malformed bytes give kInvalidArgument naming
  // what is wrong and where (byte offset, instruction).
  static StatusOr<std::shared_ptr<const LoadedProgram>> Load(const void* bytes, size_t size);

  const TargetSpec& target() const;
  const std::vector<TensorInfo>& parameters() const;
  const std::vector<TensorInfo>& outputs() const;
  int64_t temporary_bytes() const;      // HBM for temporaries during one execution
  int64_t constant_bytes() const;       // HBM held by constants while loaded
  const std::string& source() const;    // StableHLO text the program came from
  const std::vector<uint8_t>& bytes() const;  // the serialized program (for Serialize)
  const Program& program() const { return *program_; }
  // Its executions' temporaries, kept between them (thread-safe: each execution leases its own).
  TemporaryPool& temporaries() const { return *temporaries_; }

  ~LoadedProgram();

 private:
  LoadedProgram() = default;
  std::unique_ptr<Program> program_;
  std::unique_ptr<TemporaryPool> temporaries_;
  std::vector<uint8_t> bytes_;
  std::vector<TensorInfo> parameters_, outputs_;
  std::string source_;
};

// One executed instruction, for the profiler.
struct InstructionRecord {
  uint8_t stream;      // stream id (docs/program-format.md)
  uint16_t opcode;
  uint32_t debug_id;
  double start_ns;
  double end_ns;       // completion: the stream's semaphore counts it from here
  int64_t bytes;       // bytes moved (DMA) or touched
  int64_t flops;       // for matmul: 2*M*N*K
  // Filled by the executor after the fields above; -1 where an executor leaves them unset (then
  // the profiler takes busy_end_ns = end_ns and cannot name the instruction's waits).
  double busy_end_ns = -1;  // start + the time the instruction occupies its stream (<= end_ns)
  int64_t index = -1;       // position in its stream's instruction list (for its waits)
  int32_t block = 0;        // the program block it belongs to (control flow; format version 2)
  int64_t iteration = 0;    // its iteration of the stream's counted loop (format version 4)
  int64_t hbm_bytes = 0;    // bytes it read from and wrote to HBM (utilization_accounting.h)
  bool fp8 = false;         // a matmul at the fp8 rate
  // A collective only (collectives.h): how it ran between the cores.
  struct Collective {
    int8_t algorithm = -1;          // kCollective* algorithm; -1: not a collective
    int32_t group_size = 0;
    double peer_wait_ns = 0;        // from this core's arrival to its group's last
    double link_utilization = 0;    // its bandwidth / what its links give with no latency
  } collective;
};

struct ExecutionProfile {
  double device_time_ns = 0;             // end of the last instruction
  std::vector<double> stream_busy_ns;    // indexed by stream id (21 entries per physical core)
  std::vector<int64_t> stream_instructions;
  int64_t matmul_flops = 0;
  // Always kept, for MFU / HFU / MBU (utilization_accounting.h): the matmul FLOPs that ran at
  // the fp8 rate, the TensorE transposes' FLOPs, and the bytes that crossed HBM.
  int64_t fp8_matmul_flops = 0;
  int64_t transpose_flops = 0;
  int64_t hbm_bytes = 0;
  std::vector<InstructionRecord> timeline;  // filled when ExecuteOptions::record_timeline
  // The program that ran, shared (not copied) so the profiler can read its debug table and each
  // instruction's waits. Set by the caller of Execute that keeps the profile; may be null.
  std::shared_ptr<const LoadedProgram> program;
};

// One host_callback instruction reaching the host (docs/host-callbacks.md): the key of its
// callback, the rank of the core that reached it, its operands' bytes and storage for its
// results' bytes, each dense row-major in the instruction's operand order.
struct HostCallbackCall {
  uint64_t callback;
  int rank;
  std::vector<std::pair<const uint8_t*, int64_t>> operands;
  std::vector<std::pair<uint8_t*, int64_t>> results;
};
using HostCallbackHandler = std::function<Status(const HostCallbackCall&)>;

struct ExecuteOptions {
  bool record_timeline = false;
  // The most times one block may be entered in an execution (a loop running past it is an
  // error, not a hang); 0: TRN_MAX_LOOP_ITERATIONS if set, else 10^7.
  int64_t max_block_entries = 0;
  // Polled at every block entry and every few thousand instructions; once it returns true the
  // execution stops with kCancelled (outputs undefined). Empty: never cancelled.
  std::function<bool()> cancelled;
  // A multi-core execution (docs/multi-device.md): the session its cores' collectives meet in
  // and this core's rank (0..num_ranks-1). Null: the program runs alone as rank 0.
  std::shared_ptr<CollectiveSession> collectives;
  int rank = 0;
  // Runs host_callback instructions, on the executing thread; its error ends the execution.
  // Empty: a program that reaches one fails with kFailedPrecondition.
  HostCallbackHandler host_callback;
};

// Runs `program` once. `parameters[i]` points at parameter i's dense row-major bytes,
// `outputs[i]` at writable storage of output i's size. Wrong counts give kInvalidArgument;
// a runtime fault (out-of-bounds access, deadlock) gives an error naming the instruction and
// its debug entry. Never aborts.
TRN_API Status Execute(const LoadedProgram& program, const std::vector<const void*>& parameters,
               const std::vector<void*>& outputs, const ExecuteOptions& options,
               ExecutionProfile* profile);

// Names for reports: "SP", "ACT", "PE", "DVE", "POOL", "DMA0".."DMA15"; core 1's streams (an
// LNC=2 program's second physical core) "SP@1" .. "DMA15@1".
TRN_API std::string StreamName(int stream);
// kFirstDmaStream, kNumDmaStreams (isa.def).
#define TRN_ISA_CONSTANT(Camel, SNAKE, value) constexpr int k##Camel = value;
#include "isa.def"
constexpr int kNumStreams = kFirstDmaStream + kNumDmaStreams;  // streams of one physical core
// Stream ids of a program on kMaxCores physical cores: core c's stream s is c * kNumStreams + s.
constexpr int kMaxStreams = kMaxCores * kNumStreams;
inline int CoreOfStream(int stream) { return stream / kNumStreams; }

// Whether executions should record their per-instruction timeline: TRN_PROFILE is set, or a
// caller turned it on (jax_trn.profile.trace()). SetRecordTimeline nests: each `true` needs a
// matching `false`.
TRN_API void SetRecordTimeline(bool on);
TRN_API bool RecordTimelineRequested();

}  // namespace trn::sim
