// The most recently completed execution on each device of one PJRT client, for the profiler
// (jax_trn.profile.last_execution). Each execution's profile is its own immutable object, shared
// (never copied or overwritten) once complete; the index only points at the latest one per device,
// so a reader gets one whole execution even while others run concurrently on the same device.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "runtime.h"

namespace trn::sim {

class TRN_API ExecutionIndex {
 public:
  explicit ExecutionIndex(int num_devices) : latest_(num_devices) {}

  // `profile` (complete, never modified again) becomes device `device_id`'s latest execution.
  void Publish(int device_id, std::shared_ptr<const ExecutionProfile> profile);
  // Null before the device's first execution, or for an id the client does not have.
  std::shared_ptr<const ExecutionProfile> Latest(int device_id) const;

  // The index of the most recently created client still alive (clients register theirs), for
  // the Python bindings, which see no PJRT client; null when there is none.
  static void Register(const std::shared_ptr<const ExecutionIndex>& index);
  static std::shared_ptr<const ExecutionIndex> Current();

 private:
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<const ExecutionProfile>> latest_;  // by device id
};

}  // namespace trn::sim
