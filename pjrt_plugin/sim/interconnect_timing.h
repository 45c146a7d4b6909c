// The modeled time of a collective over the simulated interconnect (docs/multi-device.md
// "Timing model"): the collective's algorithm (a ring over the group's members, recursive
// halving-doubling, or hierarchical: inside each chip, then between chips), each step a hop
// latency plus its bytes over the link bandwidth. Every figure is a named constant in
// interconnect_timing.cc.
#pragma once

#include <cstdint>
#include <vector>

#include "target_spec.h"

namespace trn::sim {

// Nanoseconds from the group's last arrival to completion of a collective of `kind` by
// `algorithm` (isa.def's kCollective*) whose largest buffer (the gathered or reduced one) holds
// `bytes`, over `group` (ranks) with chip_of_rank giving each rank's chip.
double CollectiveNs(uint8_t kind, uint8_t algorithm, int64_t bytes, const std::vector<int64_t>& group,
                    const std::vector<int>& chip_of_rank, const TargetSpec& target);

}  // namespace trn::sim
