// PJRT_Device: one logical NeuronCore (LNC physical cores) of one simulated chip, with its two
// memory spaces: HBM ("device", the default) and pinned host memory.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "device_description.h"
#include "execution_queue.h"
#include "memory.h"
#include "pjrt_c_api.h"
#include "sim/execution_index.h"

struct PJRT_Device {};

namespace trn::pjrt {

class Device : public PJRT_Device {
 public:
  // `hbm_bytes`: capacity of this device's share of its chip's HBM. `first_memory_id`: the
  // client-wide id of its HBM memory; pinned host memory takes the next id. `executions`: the
  // client's index of each device's latest execution (owned by the client, outlives devices).
  Device(int id, int chip, std::array<int, 3> chip_coords, int core_on_chip,
         const sim::TargetSpec& target, int lnc,
         int64_t hbm_bytes, int first_memory_id, sim::ExecutionIndex* executions);
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  int id() const { return description_.id(); }
  int local_hardware_id() const { return description_.id(); }
  int chip() const { return description_.chip(); }
  const std::string& name() const { return description_.name(); }
  DeviceDescription* description() { return &description_; }
  Memory* hbm() { return hbm_.get(); }
  Memory* pinned_host() { return pinned_host_.get(); }
  const std::vector<PJRT_Memory*>& memories() const { return memories_; }
  ExecutionQueue* queue() { return &queue_; }
  // Makes `profile` (a completed execution's, immutable) this device's latest execution.
  void PublishExecution(std::shared_ptr<const sim::ExecutionProfile> profile) {
    executions_->Publish(id(), std::move(profile));
  }

 private:
  DeviceDescription description_;
  std::unique_ptr<Memory> hbm_;          // owned; created with the device
  std::unique_ptr<Memory> pinned_host_;  // owned; created with the device
  std::vector<PJRT_Memory*> memories_;   // {hbm_, pinned_host_}
  sim::ExecutionIndex* executions_;      // not owned; the client's
  // Declared last, so it is destroyed first: its jobs hold allocations in the memories above.
  ExecutionQueue queue_;
};

}  // namespace trn::pjrt
