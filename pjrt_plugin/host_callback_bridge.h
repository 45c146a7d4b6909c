// The runtime's host-callback handler (sim::HostCallbackHandler) for executions the plugin runs:
// it calls jax_trn.host_callbacks.run(key, operands, results) with the GIL taken on the
// executing (queue worker) thread. docs/host-callbacks.md.
#pragma once

#include "sim/runtime.h"

namespace trn::pjrt {

// Runs the Python callable registered under `call.callback`: its operands' bytes as read-only
// memoryviews, its results' storage as writable ones (released after the call). An exception it
// raises becomes kInternal "host callback raised <type>: <message>" with its traceback's end.
Status RunHostCallbackInPython(const sim::HostCallbackCall& call);

}  // namespace trn::pjrt
