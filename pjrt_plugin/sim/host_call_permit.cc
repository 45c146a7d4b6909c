#include "host_call_permit.h"

#include <condition_variable>
#include <mutex>

namespace trn::sim {
namespace {

struct Permits {
  std::mutex mu;
  std::condition_variable returned;
  int held = 0;          // guarded by mu
  bool stopped = false;  // guarded by mu
};

// Never destroyed: a permit may be returned during static destruction.
Permits& permits() {
  static Permits* const p = new Permits;
  return *p;
}

}  // namespace

std::shared_ptr<HostCallPermit> HostCallPermit::Acquire() {
  Permits& p = permits();
  std::lock_guard<std::mutex> lock(p.mu);
  if (p.stopped) return nullptr;
  ++p.held;
  return std::shared_ptr<HostCallPermit>(new HostCallPermit);
}

void HostCallPermit::StopGranting() {
  Permits& p = permits();
  std::unique_lock<std::mutex> lock(p.mu);
  p.stopped = true;
  p.returned.wait(lock, [&p] { return p.held == 0; });
}

HostCallPermit::~HostCallPermit() {
  Permits& p = permits();
  std::lock_guard<std::mutex> lock(p.mu);
  if (--p.held == 0) p.returned.notify_all();
}

}  // namespace trn::sim
