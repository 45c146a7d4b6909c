// The modeled time of a collective over the simulated interconnect (docs/multi-device.md
// "Timing model"): the collective's algorithm (a ring over the group's members, recursive
// halving-doubling, or hierarchical: inside each chip, then between chips) as rounds of
// transfers, each a hop latency per link it crosses plus its bytes over the bandwidth it gets.
// The transfers of one round, of every replica group of the instruction (they run at once),
// share the chip links they cross (chip_topology.h routes them). Every figure is a named
// constant in interconnect_timing.cc or chip_topology.cc.
#pragma once

#include <cstdint>
#include <vector>

#include "chip_topology.h"
#include "program.h"
#include "target_spec.h"

namespace trn::sim {

// The interconnect of one execution: the chip each rank is on and how the chips are wired.
struct Interconnect {
  std::vector<int> chip_of_rank;
  ChipTopology topology;
};

// Nanoseconds from the group's last arrival to completion of collective `c` whose largest
// buffer (the gathered or reduced one) holds `bytes`, for the members of `group` (ranks; one of
// c's groups, or the cores c's permute pairs name).
__attribute__((visibility("default"))) double CollectiveNs(const Collective& c, int64_t bytes, const std::vector<int64_t>& group,
                    const Interconnect& net, const TargetSpec& target);

}  // namespace trn::sim
