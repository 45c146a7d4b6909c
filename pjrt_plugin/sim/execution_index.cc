#include "execution_index.h"

#include <atomic>

namespace trn::sim {
namespace {

std::mutex& RegistryMutex() {
  static std::mutex mutex;
  return mutex;
}

// Registered clients' indexes; expired entries are dropped on the next Register.
std::vector<std::weak_ptr<const ExecutionIndex>>& Registry() {
  static std::vector<std::weak_ptr<const ExecutionIndex>> indexes;
  return indexes;
}

}  // namespace

void ExecutionIndex::Publish(int device_id, std::shared_ptr<const ExecutionProfile> profile) {
  static std::atomic<uint64_t> completions{0};
  if (device_id < 0 || device_id >= static_cast<int>(latest_.size())) return;
  std::lock_guard<std::mutex> lock(mutex_);
  latest_[device_id].completion = ++completions;
  latest_[device_id].profile.swap(profile);  // the replaced profile is freed after the lock is released
}

ExecutionIndex::Entry ExecutionIndex::LatestEntry(int device_id) const {
  if (device_id < 0 || device_id >= static_cast<int>(latest_.size())) return {};
  std::lock_guard<std::mutex> lock(mutex_);
  return latest_[device_id];
}

std::shared_ptr<const ExecutionProfile> ExecutionIndex::Latest(int device_id) const {
  return LatestEntry(device_id).profile;
}

void ExecutionIndex::Register(const std::shared_ptr<const ExecutionIndex>& index) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  auto& indexes = Registry();
  std::erase_if(indexes, [](const auto& weak) { return weak.expired(); });
  indexes.push_back(index);
}

std::shared_ptr<const ExecutionProfile> ExecutionIndex::LatestOfAnyClient(int device_id) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  Entry latest;
  for (const auto& weak : Registry()) {
    if (auto index = weak.lock()) {
      Entry entry = index->LatestEntry(device_id);
      if (entry.profile != nullptr && entry.completion > latest.completion) latest = std::move(entry);
    }
  }
  return latest.profile;
}

}  // namespace trn::sim
