#include "device.h"

namespace trn::pjrt {

Device::Device(int id, int chip, std::array<int, 3> chip_coords, int core_on_chip,
               const sim::TargetSpec& target, int lnc, int64_t hbm_bytes, int first_memory_id,
               sim::ExecutionIndex* executions)
    : description_(id, chip, chip_coords, core_on_chip, target, lnc), executions_(executions) {
  hbm_ = std::make_unique<Memory>(first_memory_id, MemoryKind::kDevice, this, hbm_bytes);
  pinned_host_ = std::make_unique<Memory>(first_memory_id + 1, MemoryKind::kPinnedHost, this,
                                          /*capacity=*/-1);
  memories_ = {hbm_.get(), pinned_host_.get()};
}

}  // namespace trn::pjrt
