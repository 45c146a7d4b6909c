// Executions captured for jax.profiler trace sessions (the PJRT profiler extension). While a
// session runs it keeps the per-instruction timeline recording on (sim::SetRecordTimeline) and
// collects every execution that completes on any trn device of any client in the process, with
// the host time at which its device started it, for the XSpace encoder (xspace_encoder.h).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "sim/runtime.h"
#include "sim/status.h"

namespace trn::pjrt {

struct CapturedExecution {
  int device_id = 0;
  std::string device_name;  // "TRN_0"
  // Host wall clock (ns since the Unix epoch, the clock jax.profiler's host events use) when
  // the device's queue started simulating it.
  int64_t host_start_ns = 0;
  // Whether its timeline was recorded: not for a run submitted before the session started
  // (whether to record is decided at submission).
  bool timeline_recorded = false;
  std::shared_ptr<const sim::ExecutionProfile> profile;  // complete and immutable
};

// The host wall clock in ns since the Unix epoch.
int64_t HostClockNs();

class TraceSession {
 public:
  TraceSession() = default;
  TraceSession(const TraceSession&) = delete;
  TraceSession& operator=(const TraceSession&) = delete;
  ~TraceSession();  // stops it if running

  Status Start();  // FAILED_PRECONDITION if it runs already
  Status Stop();   // FAILED_PRECONDITION if it does not run
  // What it captured between Start and Stop, in completion order.
  std::vector<CapturedExecution> Executions() const;

  // Called by every completed execution: hands it to each running session. One atomic load
  // when none runs.
  static void Capture(const CapturedExecution& execution);

 private:
  void Add(const CapturedExecution& execution);

  mutable std::mutex mutex_;
  bool running_ = false;
  std::vector<CapturedExecution> executions_;
};

}  // namespace trn::pjrt
