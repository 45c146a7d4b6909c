// The most recently completed execution on each device of one PJRT client, for the profiler
// (jax_trn.profile.last_execution). Each execution's profile is its own immutable object, shared
// (never copied or overwritten) once complete; the index only points at the latest one per device,
// so a reader gets one whole execution even while others run concurrently on the same device.
#pragma once

#include <cstdint>
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

  // For the Python bindings, which see no PJRT client: of every live client's index (clients
  // register theirs; JAX and torch_xla each hold one in a shared process), the execution on
  // device `device_id` that completed last; null when there is none.
  static void Register(const std::shared_ptr<const ExecutionIndex>& index);
  static std::shared_ptr<const ExecutionProfile> LatestOfAnyClient(int device_id);

 private:
  struct Entry {
    uint64_t completion = 0;  // process-wide publication order
    std::shared_ptr<const ExecutionProfile> profile;
  };
  Entry LatestEntry(int device_id) const;

  mutable std::mutex mutex_;
  std::vector<Entry> latest_;  // by device id
};

}  // namespace trn::sim
