// The plugin's calls into Python end before the interpreter finalizes. Once finalization has
// begun, Python ends (pthread_exit: a forced unwind) any other thread that takes the GIL, and a
// thread inside a noexcept frame of jaxlib then aborts the process (JAX's pure_callback wrapper
// creates the CPU client in one, with the GIL released). So every call into Python from a plugin
// thread holds a PythonPermit, and jax_trn's atexit hook, which runs before finalization, calls
// TrnStopPythonCalls: from then on no permit is granted, and it waits, with the GIL released,
// until every permit granted before is returned.
#pragma once

#include <memory>

namespace trn::pjrt {

class PythonPermit {
 public:
  // A permit, or null once Python calls have stopped (the interpreter is exiting).
  static std::shared_ptr<PythonPermit> Acquire();
  ~PythonPermit();
  PythonPermit(const PythonPermit&) = delete;
  PythonPermit& operator=(const PythonPermit&) = delete;

 private:
  PythonPermit() = default;
};

}  // namespace trn::pjrt

// Stops the plugin's Python calls and returns once none is in progress or pending: a queued run
// that holds a permit (one with host callbacks, queued before this) still runs its callbacks.
// Called by jax_trn.host_callbacks' atexit hook through ctypes (which releases the GIL).
extern "C" __attribute__((visibility("default"))) void TrnStopPythonCalls();
