#include "chip_topology.h"

#include <cstdlib>
#include <string_view>

namespace trn::sim {
namespace {

// Chips of one instance, as a 4×4 torus: trn1.32xlarge and trn2.48xlarge hold 16 chips in a
// 2-D torus (neuroncore.md "Instances"; trn2's is named 4×4, trn1's est. the same shape).
constexpr int kTorusSide = 4;
constexpr int kChipsPerInstance = kTorusSide * kTorusSide;
// A Trn2 UltraServer joins 4 instances (64 chips) in a 3-D torus (neuroncore.md); trn3 est.
// the same. trn1 comes in no larger NeuronLink system.
constexpr int kUltraServerInstances = 4;
// A chip of a 2-D torus has 4 neighbours; a trn2 chip has 1,024 GB/s to the others of its
// instance (neuroncore.md), est. split evenly: 256 GB/s per link. trn1 and trn3: their
// NeuronLink figure (TargetSpec::chip_link_bytes_per_ns, 384 GB/s / 2.56 TB/s per chip) split
// the same way.
constexpr double kTrn2InstanceBytesPerNsPerChip = 1024.0;
constexpr int kLinksPerChipInInstance = 4;
// Between instances of an UltraServer a trn2 chip has 256 GB/s (neuroncore.md), est. split over
// its two z neighbours: 128 GB/s per link; trn3 est. as trn2.
constexpr double kUltraServerBytesPerNsPerChip = 256.0;
constexpr int kLinksPerChipBetweenInstances = 2;

bool IsTrn1(const TargetSpec& t) { return std::string_view(t.name) == "trn1"; }

}  // namespace

int MaxChips(const TargetSpec& target) {
  return IsTrn1(target) ? kChipsPerInstance : kChipsPerInstance * kUltraServerInstances;
}

StatusOr<ChipTopology> TopologyOf(const TargetSpec& target, int chips) {
  if (chips < 1 || chips > MaxChips(target)) {
    return InvalidArgument("trn chips must be between 1 and " + std::to_string(MaxChips(target)) +
                           " on " + target.name + " (" +
                           (IsTrn1(target) ? "one trn1.32xlarge" : "one Trn2 UltraServer") +
                           "), got " + std::to_string(chips));
  }
  const bool trn2 = std::string_view(target.name) == "trn2";
  const double per_chip = trn2 ? kTrn2InstanceBytesPerNsPerChip : target.chip_link_bytes_per_ns;
  ChipTopology t{};
  t.link_bytes_per_ns = per_chip / kLinksPerChipInInstance;
  t.instance_link_bytes_per_ns = kUltraServerBytesPerNsPerChip / kLinksPerChipBetweenInstances;
  if (chips <= kChipsPerInstance) {
    t.instance = IsTrn1(target) ? "trn1.32xlarge" : trn2 ? "trn2.48xlarge" : "trn3 instance";
    t.dims = {kTorusSide, kTorusSide, 1};
  } else {
    t.instance = trn2 ? "Trn2 UltraServer" : "trn3 UltraServer";
    t.dims = {kTorusSide, kTorusSide, kUltraServerInstances};
  }
  return t;
}

std::array<int, 3> ChipCoords(const ChipTopology& topology, int chip) {
  const int x = topology.dims[0], y = topology.dims[1];
  return {chip % x, chip / x % y, chip / (x * y)};
}

std::vector<ChipLink> Route(const ChipTopology& topology, int from, int to) {
  std::array<int, 3> at = ChipCoords(topology, from);
  const std::array<int, 3> goal = ChipCoords(topology, to);
  std::vector<ChipLink> links;
  for (int dim = 0; dim < 3; ++dim) {
    const int size = topology.dims[dim];
    const int forward = ((goal[dim] - at[dim]) % size + size) % size;
    const int direction = forward <= size - forward ? 1 : -1;
    for (int steps = direction > 0 ? forward : size - forward; steps > 0; --steps) {
      const int chip = at[0] + topology.dims[0] * (at[1] + topology.dims[1] * at[2]);
      links.push_back({chip, dim, direction});
      at[dim] = ((at[dim] + direction) % size + size) % size;
    }
  }
  return links;
}

}  // namespace trn::sim
