#include "event.h"

#include "error.h"

namespace trn::pjrt {

std::shared_ptr<Completion> Completion::Done(Status status) {
  auto done = std::make_shared<Completion>();
  done->ready_ = true;
  done->status_ = std::move(status);
  return done;
}

void Completion::Complete(Status status) {
  std::vector<Callback> callbacks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ready_) return;
    status_ = std::move(status);
    ready_ = true;
    callbacks.swap(callbacks_);
  }
  cv_.notify_all();
  // A callback may destroy events or start more work: no lock is held here.
  for (Callback& callback : callbacks) callback(status_);
}

bool Completion::is_ready() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ready_;
}

const Status& Completion::Await() const {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return ready_; });
  return status_;
}

void Completion::OnReady(Callback callback) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ready_) {
      callbacks_.push_back(std::move(callback));
      return;
    }
  }
  callback(status_);
}

void Event::OnReady(PJRT_Event_OnReadyCallback callback, void* user_arg) const {
  completion_->OnReady([callback, user_arg](const Status& status) {
    callback(ToPjrtError(status, "PJRT_Event_OnReady"), user_arg);
  });
}

}  // namespace trn::pjrt
