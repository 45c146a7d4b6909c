#include "interrupt.h"

#include <signal.h>

#include <atomic>
#include <mutex>

namespace trn::pjrt {
namespace {

std::atomic<uint64_t> interrupts{0};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "the signal handler needs it");

// The handler this one chains to. Written only while this handler is not installed.
struct sigaction previous_action;

void OnInterrupt(int signal_number, siginfo_t* info, void* context) {
  interrupts.fetch_add(1, std::memory_order_relaxed);
  if (previous_action.sa_flags & SA_SIGINFO) {
    previous_action.sa_sigaction(signal_number, info, context);
  } else if (previous_action.sa_handler != SIG_DFL && previous_action.sa_handler != SIG_IGN) {
    previous_action.sa_handler(signal_number);
  }
}

bool IsOurs(const struct sigaction& action) {
  return (action.sa_flags & SA_SIGINFO) && action.sa_sigaction == OnInterrupt;
}

}  // namespace

uint64_t InterruptCount() { return interrupts.load(std::memory_order_relaxed); }

void WatchInterrupts() {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  struct sigaction current {};
  if (sigaction(SIGINT, nullptr, &current) != 0 || IsOurs(current)) return;
  if (!(current.sa_flags & SA_SIGINFO) &&
      (current.sa_handler == SIG_DFL || current.sa_handler == SIG_IGN)) {
    return;
  }
  previous_action = current;
  struct sigaction ours = current;
  ours.sa_flags = current.sa_flags | SA_SIGINFO;
  ours.sa_sigaction = OnInterrupt;
  sigaction(SIGINT, &ours, nullptr);
}

}  // namespace trn::pjrt
