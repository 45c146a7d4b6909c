#include "execution_queue.h"

namespace trn::pjrt {

ExecutionQueue::~ExecutionQueue() {
  Stop();
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void ExecutionQueue::Submit(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!worker_.joinable()) worker_ = std::thread([this] { Work(); });
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void ExecutionQueue::Work() {
  while (true) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return closing_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace trn::pjrt
