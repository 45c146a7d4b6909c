#include "temporary_pool.h"

namespace trn::sim {

TemporaryPool::Lease::~Lease() {
  if (set_ != nullptr) pool_->Release(std::move(set_));
}

std::unique_ptr<TemporaryPool::Lease> TemporaryPool::Acquire(size_t* failed) {
  std::unique_ptr<std::vector<ZeroedBuffer>> set;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!idle_.empty()) {
      set = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  if (set != nullptr) {
    // Zeroed outside the lock: another execution of the program need not wait for it.
    for (ZeroedBuffer& buffer : *set) buffer.Rezero();
  } else {
    set = std::make_unique<std::vector<ZeroedBuffer>>();
    set->reserve(sizes_.size());
    for (size_t i = 0; i < sizes_.size(); ++i) {
      set->emplace_back(static_cast<size_t>(sizes_[i]));
      if (!set->back().ok()) {
        *failed = i;
        return nullptr;
      }
    }
  }
  return std::make_unique<Lease>(this, std::move(set));
}

void TemporaryPool::Release(std::unique_ptr<std::vector<ZeroedBuffer>> set) {
  std::lock_guard<std::mutex> lock(mutex_);
  idle_.push_back(std::move(set));
}

}  // namespace trn::sim
