// The HBM temporaries of one loaded program, kept between its executions: mapping them afresh
// each time cost a page fault (and the kernel's zeroing) per page touched, and unmapping them a
// TLB shootdown. Every execution still starts with all-zero temporaries, as with fresh mappings
// (docs/program-format.md, "Tensors"), so reuse needs no rule about what a program reads first.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "machine.h"

namespace trn::sim {

class TemporaryPool {
 public:
  // One execution's temporaries, in the program's tensor order; they go back to the pool when
  // the lease ends, whether the execution succeeded, failed or was cancelled.
  class Lease {
   public:
    Lease(TemporaryPool* pool, std::unique_ptr<std::vector<ZeroedBuffer>> set)
        : pool_(pool), set_(std::move(set)) {}
    Lease(Lease&&) = default;
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    std::vector<ZeroedBuffer>& buffers() { return *set_; }

   private:
    TemporaryPool* pool_;
    std::unique_ptr<std::vector<ZeroedBuffer>> set_;
  };

  // `sizes`: the bytes of each temporary of the program, in tensor order.
  explicit TemporaryPool(std::vector<int64_t> sizes) : sizes_(std::move(sizes)) {}

  // A set of all-zero temporaries that no other execution holds: an idle set, its dirty pages
  // re-zeroed, or a fresh one (the pool keeps as many sets as executions ever ran at once).
  // Null when the host cannot map one; `failed` then names the temporary.
  std::unique_ptr<Lease> Acquire(size_t* failed);

 private:
  void Release(std::unique_ptr<std::vector<ZeroedBuffer>> set);

  const std::vector<int64_t> sizes_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<std::vector<ZeroedBuffer>>> idle_;
};

}  // namespace trn::sim
