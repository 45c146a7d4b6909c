// The plugin's calls into the host process's Python end before the interpreter finalizes. Once
// finalization has begun, Python ends (pthread_exit: a forced unwind) any other thread that takes
// the GIL, and a thread inside a noexcept frame of jaxlib then aborts the process (JAX's
// pure_callback wrapper creates the CPU client in one, with the GIL released). So every call into
// Python from a plugin thread holds a HostCallPermit, and jax_trn's atexit hook, which runs before
// finalization, calls StopGranting (jax_trn._native.stop_host_calls): from then on no permit is
// granted, and it waits until every permit granted before is returned. Here, in the runtime
// library, so that the plugin and the Python bindings share the one gate.
#pragma once

#include <memory>

#include "runtime.h"

namespace trn::sim {

class TRN_API HostCallPermit {
 public:
  // A permit, or null once StopGranting was called (the interpreter is exiting).
  static std::shared_ptr<HostCallPermit> Acquire();
  // Grants no more permits and returns once every granted one is returned: a queued run holding
  // one (a run with host callbacks, queued before this) still runs its callbacks. The caller
  // must not hold the GIL (those callbacks take it).
  static void StopGranting();

  ~HostCallPermit();
  HostCallPermit(const HostCallPermit&) = delete;
  HostCallPermit& operator=(const HostCallPermit&) = delete;

 private:
  HostCallPermit() = default;
};

}  // namespace trn::sim
