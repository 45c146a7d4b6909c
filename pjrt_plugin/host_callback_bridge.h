// The plugin's side of host callbacks (docs/host-callbacks.md): the runtime's handler
// (sim::HostCallbackHandler), which calls jax_trn.host_callbacks.run(key, rank, operands, results)
// with the GIL taken on the executing (queue worker) thread, and the lease that keeps a loaded
// program's callbacks registered while the executable or any of its queued runs lives.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/host_call_permit.h"
#include "sim/runtime.h"

namespace trn::pjrt {

// Runs the Python callable registered under `call.callback`: its operands' bytes as read-only
// memoryviews, its results' storage as writable ones (released after the call). An exception it
// raises becomes kInternal "host callback raised <type>: <message>" with its traceback's end.
// `permit` is the run's, acquired when it was queued (sim/host_call_permit.h): null (the interpreter was
// exiting by then) gives kCancelled without calling Python.
Status RunHostCallbackInPython(const sim::HostCallPermit* permit, const sim::HostCallbackCall& call);

// Holds the program's callback keys in jax_trn.host_callbacks (hold(keys) now, release(keys)
// when destroyed, each with the GIL and a sim::HostCallPermit; skipped once the interpreter is exiting), so a run queued before JAX frees its executable still
// finds them. Shared by the loaded executable and each of its queued runs.
class HostCallbackLease {
 public:
  // Null for a program without host_callback instructions (no Python is touched then).
  static std::shared_ptr<HostCallbackLease> ForProgram(const sim::LoadedProgram& program);
  explicit HostCallbackLease(std::vector<uint64_t> keys);
  ~HostCallbackLease();
  HostCallbackLease(const HostCallbackLease&) = delete;
  HostCallbackLease& operator=(const HostCallbackLease&) = delete;

 private:
  std::vector<uint64_t> keys_;
};

}  // namespace trn::pjrt
