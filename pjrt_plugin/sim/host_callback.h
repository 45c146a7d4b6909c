// host_callback: the one instruction that leaves the chip. The runtime copies its operands out
// of HBM, hands them to the ExecuteOptions' HostCallbackHandler (the plugin's: a Python callable
// JAX lowered into the program, docs/host-callbacks.md) and copies the results it returns into
// HBM. The simulator knows nothing of Python: the handler is a plain function of bytes.
#pragma once

#include "machine.h"
#include "program.h"
#include "runtime.h"

namespace trn::sim {

// Runs `h` on `machine` through `handler`; the handler's error (the callback raised) is returned
// prefixed with what the instruction is. An empty handler: kFailedPrecondition.
Status RunHostCallback(Machine& machine, const HostCallback& h, const HostCallbackHandler& handler,
                       const std::string& what);

}  // namespace trn::sim
