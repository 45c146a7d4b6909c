#include "host_parallel.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace trn::sim {
namespace {

constexpr int kMaxThreads = 64;

int ThreadsFromEnvironment() {
  if (const char* env = std::getenv("TRN_SIM_THREADS"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const long value = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && value > 0) return static_cast<int>(std::min<long>(value, kMaxThreads));
  }
  cpu_set_t cpus;
  const int available = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  return std::clamp(available, 1, kMaxThreads);
}

// Workers 1..n-1 of a ParallelFor (the caller is worker 0). Workers sleep between instructions.
class WorkerPool {
 public:
  explicit WorkerPool(int workers) {
    for (int i = 1; i <= workers; ++i) std::thread([this, i] { Work(i); }).detach();
  }

  // Runs task(i) for i in [0, n): i = 0 on the caller, the others on workers 1..n-1. Returns
  // false without running anything when another caller holds the pool.
  bool TryRun(int n, const std::function<void(int)>& task) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      task_ = &task;
      tasks_ = n;
      pending_ = n - 1;
      ++generation_;
    }
    wake_.notify_all();
    task(0);
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
    task_ = nullptr;
    return true;
  }

 private:
  void Work(int index) {
    uint64_t seen = 0;
    while (true) {
      const std::function<void(int)>* task = nullptr;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        if (index >= tasks_) continue;
        task = task_;
      }
      (*task)(index);
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::mutex busy_;   // held by the caller of TryRun for the whole run
  std::mutex mutex_;  // guards the fields below
  std::condition_variable wake_, done_;
  const std::function<void(int)>* task_ = nullptr;
  int tasks_ = 0;
  int pending_ = 0;
  uint64_t generation_ = 0;
};

// The process's pool, made on first use. Never destroyed: its detached workers may still be
// waiting when the process exits. A forked child has none of its parent's workers, so it makes
// its own.
WorkerPool& Pool() {
  static std::mutex mutex;
  static WorkerPool* pool = nullptr;
  static pid_t owner = 0;
  std::lock_guard<std::mutex> lock(mutex);
  if (pool == nullptr || owner != getpid()) {
    pool = new WorkerPool(HostThreads() - 1);
    owner = getpid();
  }
  return *pool;
}

}  // namespace

int HostThreads() {
  static const int threads = ThreadsFromEnvironment();
  return threads;
}

void ParallelFor(int64_t pieces, const std::function<void(int64_t begin, int64_t end)>& body) {
  const int threads = static_cast<int>(std::min<int64_t>(HostThreads(), pieces));
  if (threads > 1) {
    const auto range = [&](int i) { body(pieces * i / threads, pieces * (i + 1) / threads); };
    if (Pool().TryRun(threads, range)) return;
  }
  body(0, pieces);
}

}  // namespace trn::sim
