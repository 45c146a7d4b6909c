// How the simulated chips are wired (docs/multi-device.md "Topology"): the instance a target's
// chips sit in (trn1.32xlarge: 16 chips, a 4×4 2-D torus; trn2.48xlarge: 16 chips, a 4×4 2-D
// torus; a Trn2 UltraServer: 4 such instances, 64 chips, a 4×4×4 3-D torus), each chip's place in
// it, and the links a transfer between two chips crosses. Chip c of an execution is chip c of
// the system, x fastest: c = x + 4 y + 16 z.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "status.h"
#include "target_spec.h"

namespace trn::sim {

struct ChipTopology {
  const char* instance;              // "trn2.48xlarge", "Trn2 UltraServer"
  std::array<int, 3> dims;           // torus ring sizes along x, y, z
  double link_bytes_per_ns;          // one x or y link (inside an instance), each direction
  double instance_link_bytes_per_ns; // one z link (between instances), each direction
};

// One directed link: from `chip` one step along `dim` (0 x, 1 y, 2 z) in `direction` (+1 / -1).
struct ChipLink {
  int chip, dim, direction;
  bool operator<(const ChipLink& o) const {
    return chip != o.chip ? chip < o.chip : dim != o.dim ? dim < o.dim : direction < o.direction;
  }
};

// The topology of `chips` chips of `target`: one instance up to its chips, else the target's
// UltraServer. INVALID_ARGUMENT beyond the largest system the target comes in.
__attribute__((visibility("default"))) StatusOr<ChipTopology> TopologyOf(const TargetSpec& target, int chips);

// The most chips one system of `target` holds (trn1 16, trn2 and trn3 64).
__attribute__((visibility("default"))) int MaxChips(const TargetSpec& target);

// The chip's (x, y, z) in its torus.
__attribute__((visibility("default"))) std::array<int, 3> ChipCoords(const ChipTopology& topology, int chip);

// The links from chip `from` to chip `to`, in order: dimension-order routing (x, then y, then
// z), each ring the shorter way round (a tie: the + direction). Empty for one chip.
std::vector<ChipLink> Route(const ChipTopology& topology, int from, int to);

}  // namespace trn::sim
