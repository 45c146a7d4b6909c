#include "interconnect_timing.h"

#include <algorithm>
#include <map>
#include <utility>

#include "runtime.h"

namespace trn::sim {
namespace {

// Issuing a collective: its DMA descriptors are written like a hardware-descriptor DMA's
// (≈600 ns to issue, neuroncore.md "DMA"); charged once per collective.
constexpr double kCollectiveIssueNs = 600.0;
// One step between cores, or over one chip link, inside a node: "≈1–2 µs per hop inside a node"
// (neuroncore.md "Collectives"); est. the middle of that range.
constexpr double kHopInsideNodeNs = 1500.0;
// One step over a link between nodes (an UltraServer's z links): "≈15 µs across nodes"
// (neuroncore.md "Collectives").
constexpr double kHopAcrossNodesNs = 15000.0;

// One transfer of a round: from rank to rank, of replica group `group`.
struct Transfer {
  int64_t from, to;
  size_t group;
};

// The transfers of a round, for the member's group to finish.
struct Round {
  std::vector<Transfer> transfers;
  size_t group;  // the finishing member's group
};

// Cores of one chip move data through the chip's HBM with their DMA engines (est.: one core's
// DMA rate, whichever core it is, no contention: 8 trn2 cores × 368 GB/s ≈ the 2.9 TB/s HBM).
double CoreBytesPerNs(const TargetSpec& t) { return t.dma_bytes_per_ns_per_engine * t.dma_engines_per_core; }

// The round's time for `round.group`: each transfer crosses the chip links of its route, one
// hop each, its bandwidth the least of the core's DMA rate and each link's bandwidth divided
// among the round's transfers crossing that link (of every group).
double RoundNs(const Round& round, double bytes, const Interconnect& net, const TargetSpec& t) {
  std::vector<std::vector<ChipLink>> routes;
  std::map<ChipLink, int> load;
  for (const Transfer& x : round.transfers) {
    routes.push_back(Route(net.topology, net.chip_of_rank[x.from], net.chip_of_rank[x.to]));
    for (const ChipLink& link : routes.back()) ++load[link];
  }
  double slowest = 0.0;
  for (size_t i = 0; i < round.transfers.size(); ++i) {
    if (round.transfers[i].group != round.group) continue;
    double hop_ns = routes[i].empty() ? kHopInsideNodeNs : 0.0, bytes_per_ns = CoreBytesPerNs(t);
    for (const ChipLink& link : routes[i]) {
      const bool between_nodes = link.dim == 2;
      hop_ns += between_nodes ? kHopAcrossNodesNs : kHopInsideNodeNs;
      const double link_bytes_per_ns =
          between_nodes ? net.topology.instance_link_bytes_per_ns : net.topology.link_bytes_per_ns;
      bytes_per_ns = std::min(bytes_per_ns, link_bytes_per_ns / load.at(link));
    }
    slowest = std::max(slowest, hop_ns + bytes / bytes_per_ns);
  }
  return slowest;
}

// Every group's ring (consecutive members, the last back to the first) as one round.
Round RingRound(const std::vector<std::vector<int64_t>>& groups, size_t mine) {
  Round round{{}, mine};
  for (size_t g = 0; g < groups.size(); ++g) {
    const size_t n = groups[g].size();
    for (size_t i = 0; i < n; ++i) round.transfers.push_back({groups[g][i], groups[g][(i + 1) % n], g});
  }
  return round;
}

// One half (reduce-scatter by recursive halving, or all-gather by recursive doubling) over
// power-of-two groups: round k = 1..log2 n exchanges bytes / 2^k with the member n / 2^k
// positions away.
double HalvingNs(int64_t bytes, const std::vector<std::vector<int64_t>>& groups, size_t mine,
                 const Interconnect& net, const TargetSpec& t) {
  const size_t n = groups[mine].size();
  double total = 0.0, round_bytes = static_cast<double>(bytes);
  for (size_t distance = n / 2; distance >= 1; distance /= 2) {
    round_bytes /= 2.0;
    Round round{{}, mine};
    for (size_t g = 0; g < groups.size(); ++g) {
      for (size_t j = 0; j < groups[g].size(); ++j) round.transfers.push_back({groups[g][j], groups[g][j ^ distance], g});
    }
    total += RoundNs(round, round_bytes, net, t);
  }
  return total;
}

// Hierarchical all-reduce: a ring reduce-scatter among each chip's c members, then c rings
// between the chips (the k-th member of each chip: a ring all-reduce of piece k, B / c), then a
// ring all-gather inside each chip. The c rings cross the same chip links, visiting the chips in
// the order the group reaches them. Members spread
// unevenly over chips (in any group): the flat ring.
double HierarchicalNs(int64_t bytes, const std::vector<std::vector<int64_t>>& groups, size_t mine,
                      const Interconnect& net, const TargetSpec& t) {
  std::vector<std::vector<int64_t>> inside, across;
  size_t c = 0, m = 0, mine_inside = 0, mine_across = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<std::pair<int, std::vector<int64_t>>> by_chip;  // chips in group order
    for (int64_t r : groups[g]) {
      const int chip = net.chip_of_rank[r];
      auto at = std::find_if(by_chip.begin(), by_chip.end(), [&](const auto& e) { return e.first == chip; });
      if (at == by_chip.end()) at = by_chip.insert(by_chip.end(), {chip, {}});
      at->second.push_back(r);
    }
    if (g == mine) mine_inside = inside.size(), mine_across = across.size();
    for (const auto& [chip, members] : by_chip) {
      if (c == 0) c = members.size(), m = by_chip.size();
      if (members.size() != c || by_chip.size() != m) {
        const double steps = 2.0 * static_cast<double>(groups[mine].size() - 1);
        return steps * RoundNs(RingRound(groups, mine), static_cast<double>(bytes) / groups[mine].size(), net, t);
      }
      inside.push_back(members);
    }
    for (size_t k = 0; k < c; ++k) {
      across.emplace_back();
      for (const auto& [chip, members] : by_chip) across.back().push_back(members[k]);
    }
  }
  const double piece = static_cast<double>(bytes) / static_cast<double>(c);
  const double inside_ns = 2.0 * static_cast<double>(c - 1) * RoundNs(RingRound(inside, mine_inside), piece, net, t);
  const double across_ns = m > 1 ? 2.0 * static_cast<double>(m - 1) *
                                       RoundNs(RingRound(across, mine_across), piece / static_cast<double>(m), net, t)
                                 : 0.0;
  return inside_ns + across_ns;
}

}  // namespace

double CollectiveNs(const Collective& c, int64_t bytes, const std::vector<int64_t>& group,
                    const Interconnect& net, const TargetSpec& target) {
  const int64_t n = static_cast<int64_t>(group.size());
  if (n <= 1) return kCollectiveIssueNs;
  if (c.kind == kCollectivePermute) {  // every pair at once, the whole buffer
    Round round{{}, 0};
    for (const auto& [source, destination] : c.pairs) round.transfers.push_back({source, destination, 0});
    return kCollectiveIssueNs + RoundNs(round, static_cast<double>(bytes), net, target);
  }
  const std::vector<std::vector<int64_t>>& groups = c.groups;
  const size_t mine = std::find(groups.begin(), groups.end(), group) - groups.begin();
  if (c.algorithm == kCollectiveHalvingDoubling) {
    const double half = HalvingNs(bytes, groups, mine, net, target);
    return kCollectiveIssueNs + (c.kind == kCollectiveAllReduce ? 2.0 * half : half);
  }
  if (c.algorithm == kCollectiveHierarchical) return kCollectiveIssueNs + HierarchicalNs(bytes, groups, mine, net, target);
  const Round ring = RingRound(groups, mine);
  const double chunk = static_cast<double>(bytes) / static_cast<double>(n);
  const double steps = static_cast<double>(n - 1);
  switch (c.kind) {
    case kCollectiveAllReduce:  // ring reduce-scatter, then ring all-gather
      return kCollectiveIssueNs + 2.0 * steps * RoundNs(ring, chunk, net, target);
    case kCollectiveBroadcast:  // a pipelined ring: n-1 steps' hops, the buffer streamed once
      return kCollectiveIssueNs + (steps - 1.0) * RoundNs(ring, 0.0, net, target) +
             RoundNs(ring, static_cast<double>(bytes), net, target);
    default:  // all-gather, reduce-scatter, all-to-all: n-1 steps of one chunk
      return kCollectiveIssueNs + steps * RoundNs(ring, chunk, net, target);
  }
}

}  // namespace trn::sim
