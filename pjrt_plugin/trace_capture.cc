#include "trace_capture.h"

#include <algorithm>
#include <atomic>
#include <chrono>

namespace trn::pjrt {
namespace {

// The running sessions. A session registers itself in Start and leaves in Stop (or when
// destroyed), under the registry's lock, so Capture never reaches a destroyed one.
struct Registry {
  std::mutex mutex;
  std::vector<TraceSession*> running;
  std::atomic<int> count{0};
};

Registry& Sessions() {
  static Registry* registry = new Registry();  // never destroyed: executions may end at exit
  return *registry;
}

}  // namespace

int64_t HostClockNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

TraceSession::~TraceSession() {
  (void)Stop();  // a session destroyed while running leaves the registry and the recording
}

Status TraceSession::Start() {
  Registry& registry = Sessions();
  std::lock_guard<std::mutex> registry_lock(registry.mutex);
  std::lock_guard<std::mutex> lock(mutex_);
  if (running_) return FailedPrecondition("the trace session has started already");
  running_ = true;
  executions_.clear();
  registry.running.push_back(this);
  registry.count.fetch_add(1);
  sim::SetRecordTimeline(true);  // executions submitted from now on keep their timeline
  return Status::Ok();
}

Status TraceSession::Stop() {
  Registry& registry = Sessions();
  std::lock_guard<std::mutex> registry_lock(registry.mutex);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!running_) return FailedPrecondition("the trace session is not running");
  running_ = false;
  registry.running.erase(std::find(registry.running.begin(), registry.running.end(), this));
  registry.count.fetch_sub(1);
  sim::SetRecordTimeline(false);
  return Status::Ok();
}

std::vector<CapturedExecution> TraceSession::Executions() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return executions_;
}

void TraceSession::Add(const CapturedExecution& execution) {
  std::lock_guard<std::mutex> lock(mutex_);
  executions_.push_back(execution);
}

void TraceSession::Capture(const CapturedExecution& execution) {
  Registry& registry = Sessions();
  if (registry.count.load() == 0) return;
  std::lock_guard<std::mutex> registry_lock(registry.mutex);
  for (TraceSession* session : registry.running) session->Add(execution);
}

}  // namespace trn::pjrt
