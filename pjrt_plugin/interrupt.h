// Ctrl-C for executions. While Python waits for a result (block_until_ready, np.asarray) its
// main thread sits inside jaxlib with the GIL released, so Python's own SIGINT handling (a flag
// acted on at the next bytecode) cannot stop a long simulation. The plugin therefore chains a
// C-level SIGINT handler in front of the one the process installed (Python's): it counts the
// interrupt, then calls the previous handler, so Python still raises KeyboardInterrupt. Every
// execution queued or running when an interrupt arrives stops with CANCELLED, its events
// complete, the wait returns, and Python acts on the signal.
#pragma once

#include <cstdint>

namespace trn::pjrt {

// The number of SIGINTs seen since the plugin was loaded.
uint64_t InterruptCount();

// Installs the handler in front of the process's SIGINT handler, or again if the process
// replaced it since (signal.signal). Does nothing while SIGINT is ignored or has its default
// action (the process then ignores or dies of it anyway). Cheap: one sigaction query when
// already installed.
void WatchInterrupts();

}  // namespace trn::pjrt
