// One device's execution queue: a worker thread that runs the device's executions one at a time
// in submission order, so PJRT_LoadedExecutable_Execute returns once its work is queued.
// Different devices have different queues and run concurrently.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace trn::pjrt {

class ExecutionQueue {
 public:
  ExecutionQueue() = default;
  ExecutionQueue(const ExecutionQueue&) = delete;
  ExecutionQueue& operator=(const ExecutionQueue&) = delete;
  // Stops (see Stop) and waits for the worker to finish the queue.
  ~ExecutionQueue();

  // Queues `job`; the worker starts with the first job.
  void Submit(std::function<void()> job);
  // From now on the running and the queued jobs are asked to stop (stopping() is true): they
  // still run, to complete their events, but the simulator returns at its next check.
  void Stop() { stopping_.store(true); }
  bool stopping() const { return stopping_.load(); }

 private:
  void Work();

  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;  // guarded by mu_
  bool closing_ = false;                    // guarded by mu_: the worker exits when empty
  std::thread worker_;                      // started by the first Submit (under mu_)
};

}  // namespace trn::pjrt
