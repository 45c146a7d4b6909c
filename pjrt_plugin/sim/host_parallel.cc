#include "host_parallel.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>

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

// Helpers for the thread that calls ParallelFor; they sleep between instructions. A job is open
// from the moment it is posted until the caller has run out of pieces: a worker that wakes up
// later (descheduled on a busy host) skips it, so the caller never waits for a sleeping thread,
// only for the pieces already taken.
class WorkerPool {
 public:
  explicit WorkerPool(int workers) {
    for (int i = 0; i < workers; ++i) std::thread([this] { Work(); }).detach();
  }

  // Runs drain() on the caller and on every worker that wakes while the job is open. Returns
  // false without running anything when another caller holds the pool.
  bool TryRun(const std::function<void()>& drain) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &drain;
      ++generation_;
    }
    wake_.notify_all();
    drain();
    std::unique_lock<std::mutex> lock(mutex_);
    job_ = nullptr;
    done_.wait(lock, [this] { return active_ == 0; });
    return true;
  }

 private:
  void Work() {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      wake_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      const std::function<void()>* job = job_;
      if (job == nullptr) continue;  // closed before this worker woke
      ++active_;
      lock.unlock();
      (*job)();
      lock.lock();
      if (--active_ == 0) done_.notify_one();
    }
  }

  std::mutex busy_;   // held by the caller of TryRun for the whole job
  std::mutex mutex_;  // guards the fields below
  std::condition_variable wake_, done_;
  const std::function<void()>* job_ = nullptr;  // the open job, null once closed
  int active_ = 0;                              // workers inside the job
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
    // Threads take small runs of pieces from a shared counter until none are left, so a thread
    // the host deschedules delays only the run it holds.
    // An exception (std::bad_alloc of a temporary) never leaves a thread: the first one stops
    // the job and is rethrown here, once every thread has left it, as the serial path would.
    const int64_t grain = std::max<int64_t>(1, pieces / (int64_t{8} * threads));
    std::atomic<int64_t> next{0};
    std::mutex error_mutex;
    std::exception_ptr error;
    const std::function<void()> drain = [&] {
      try {
        for (int64_t begin; (begin = next.fetch_add(grain, std::memory_order_relaxed)) < pieces;) {
          body(begin, std::min(begin + grain, pieces));
        }
      } catch (...) {
        next.store(pieces, std::memory_order_relaxed);
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    };
    if (Pool().TryRun(drain)) {
      if (error) std::rethrow_exception(error);
      return;
    }
  }
  body(0, pieces);
}

}  // namespace trn::sim
