// PJRT_Event: completion of a transfer or an execution. Executions run on their device's
// execution queue (execution_queue.h), so the events of an execution and the ready events of
// its output buffers complete later, on that queue's thread; host-to-device transfers copy
// before their entry point returns and hand out events born complete.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "pjrt_c_api.h"
#include "sim/status.h"

struct PJRT_Event {};

namespace trn::pjrt {

// The completion of one operation, shared by every PJRT_Event handed out for it, the buffers
// it defines and the work that waits on it. Completes once; its status never changes after.
class Completion {
 public:
  using Callback = std::function<void(const Status&)>;

  // A completion that has already happened with `status`.
  static std::shared_ptr<Completion> Done(Status status = Status::Ok());
  static std::shared_ptr<Completion> Pending() { return std::make_shared<Completion>(); }

  // Records `status` and runs the callbacks waiting for it, on this thread, outside any lock.
  void Complete(Status status);
  bool is_ready() const;
  // Blocks until complete; the status is immutable from then on.
  const Status& Await() const;
  // Runs `callback` now when complete, otherwise on the thread that completes it.
  void OnReady(Callback callback);

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool ready_ = false;                // guarded by mu_
  Status status_;                     // guarded by mu_ until ready_, immutable after
  std::vector<Callback> callbacks_;   // guarded by mu_
};

class Event : public PJRT_Event {
 public:
  // An event that is already complete with `status`.
  explicit Event(Status status = Status::Ok()) : completion_(Completion::Done(std::move(status))) {}
  explicit Event(std::shared_ptr<Completion> completion) : completion_(std::move(completion)) {}

  bool is_ready() const { return completion_->is_ready(); }
  const Status& Await() const { return completion_->Await(); }

  // Runs `callback` once the event completes (at once, on the caller's thread, if it has). The
  // callback owns the PJRT_Error it receives (NULL on success).
  void OnReady(PJRT_Event_OnReadyCallback callback, void* user_arg) const;

 private:
  std::shared_ptr<Completion> completion_;
};

}  // namespace trn::pjrt
