#include "execution_index.h"

namespace trn::sim {
namespace {

std::mutex& RegistryMutex() {
  static std::mutex mutex;
  return mutex;
}

// Registered clients' indexes, oldest first; expired entries are dropped on the next Register.
std::vector<std::weak_ptr<const ExecutionIndex>>& Registry() {
  static std::vector<std::weak_ptr<const ExecutionIndex>> indexes;
  return indexes;
}

}  // namespace

void ExecutionIndex::Publish(int device_id, std::shared_ptr<const ExecutionProfile> profile) {
  if (device_id < 0 || device_id >= static_cast<int>(latest_.size())) return;
  std::lock_guard<std::mutex> lock(mutex_);
  latest_[device_id].swap(profile);  // the replaced profile is freed after the lock is released
}

std::shared_ptr<const ExecutionProfile> ExecutionIndex::Latest(int device_id) const {
  if (device_id < 0 || device_id >= static_cast<int>(latest_.size())) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  return latest_[device_id];
}

void ExecutionIndex::Register(const std::shared_ptr<const ExecutionIndex>& index) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  auto& indexes = Registry();
  std::erase_if(indexes, [](const auto& weak) { return weak.expired(); });
  indexes.push_back(index);
}

std::shared_ptr<const ExecutionIndex> ExecutionIndex::Current() {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  const auto& indexes = Registry();
  for (auto it = indexes.rbegin(); it != indexes.rend(); ++it) {
    if (auto index = it->lock()) return index;
  }
  return nullptr;
}

}  // namespace trn::sim
