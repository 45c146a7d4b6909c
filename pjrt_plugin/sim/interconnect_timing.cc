#include "interconnect_timing.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "runtime.h"

namespace trn::sim {
namespace {

// Issuing a collective: its DMA descriptors are written like a hardware-descriptor DMA's
// (≈600 ns to issue, neuroncore.md "DMA"); charged once per collective.
constexpr double kCollectiveIssueNs = 600.0;
// One step between cores inside a node: "≈1–2 µs per hop inside a node" (neuroncore.md
// "Collectives"); est. the middle of that range.
constexpr double kHopInsideNodeNs = 1500.0;
// One step between nodes: "≈15 µs across nodes" (neuroncore.md "Collectives").
constexpr double kHopAcrossNodesNs = 15000.0;
// Chips per node (instance): trn1.32xlarge and trn2.48xlarge hold 16 (neuroncore.md).
constexpr int kChipsPerNode = 16;

struct Link {
  double hop_ns;
  double bytes_per_ns;
};

// Cores of one chip move data through the chip's HBM with their DMA engines (est.: one core's
// DMA rate, whichever core it is); chips through NeuronLink.
Link CoreLink(const TargetSpec& t) { return {kHopInsideNodeNs, t.dma_bytes_per_ns_per_engine * t.dma_engines_per_core}; }

// The path between two ranks. Chips `d` apart (in chip order, est.: chips as a line) are d
// NeuronLink hops, and the d transfers of one round that cross each link share its bandwidth.
Link Between(int64_t a, int64_t b, const std::vector<int>& chip_of_rank, const TargetSpec& t) {
  const int ca = chip_of_rank[a], cb = chip_of_rank[b];
  if (ca == cb) return CoreLink(t);
  const int d = std::abs(ca - cb);
  const double hop = ca / kChipsPerNode != cb / kChipsPerNode ? kHopAcrossNodesNs : kHopInsideNodeNs;
  return {d * hop, t.chip_link_bytes_per_ns / d};
}

// The slowest link of the ring `group` forms (consecutive members, the last back to the first).
Link RingLink(const std::vector<int64_t>& group, const std::vector<int>& chip_of_rank, const TargetSpec& t) {
  Link slowest = CoreLink(t);
  const size_t n = group.size();
  for (size_t i = 0; i < n; ++i) {
    const int a = chip_of_rank[group[i]], b = chip_of_rank[group[(i + 1) % n]];
    if (a == b) continue;
    slowest.bytes_per_ns = std::min(slowest.bytes_per_ns, t.chip_link_bytes_per_ns);
    if (a / kChipsPerNode != b / kChipsPerNode) slowest.hop_ns = kHopAcrossNodesNs;
  }
  return slowest;
}

// A ring over `group`: `steps` steps of one hop and `step_bytes` each.
double RingNs(double steps, double step_bytes, const Link& link) { return steps * (link.hop_ns + step_bytes / link.bytes_per_ns); }

// One half (reduce-scatter by recursive halving, or all-gather by recursive doubling) over a
// power-of-two group: round k = 1..log2 n exchanges bytes / 2^k with the member n / 2^k
// positions away; each round as slow as its slowest pair.
double HalvingNs(int64_t bytes, const std::vector<int64_t>& group, const std::vector<int>& chip_of_rank, const TargetSpec& t) {
  const size_t n = group.size();
  double total = 0.0, round_bytes = static_cast<double>(bytes);
  for (size_t distance = n / 2; distance >= 1; distance /= 2) {
    round_bytes /= 2.0;
    Link slowest{0.0, 1e30};
    for (size_t j = 0; j < n; ++j) {
      const Link l = Between(group[j], group[j ^ distance], chip_of_rank, t);
      slowest = {std::max(slowest.hop_ns, l.hop_ns), std::min(slowest.bytes_per_ns, l.bytes_per_ns)};
    }
    total += slowest.hop_ns + round_bytes / slowest.bytes_per_ns;
  }
  return total;
}

// Hierarchical all-reduce: a ring reduce-scatter among each chip's members, a ring all-reduce of
// each 1/c piece among the chips (one member each), a ring all-gather inside each chip. Members
// spread unevenly over chips: a flat ring.
double HierarchicalNs(int64_t bytes, const std::vector<int64_t>& group, const std::vector<int>& chip_of_rank, const TargetSpec& t) {
  std::map<int, std::vector<int64_t>> by_chip;
  for (int64_t r : group) by_chip[chip_of_rank[r]].push_back(r);
  const size_t c = by_chip.begin()->second.size(), m = by_chip.size();
  for (const auto& [chip, members] : by_chip) {
    if (members.size() != c) return RingNs(2.0 * static_cast<double>(group.size() - 1), static_cast<double>(bytes) / static_cast<double>(group.size()), RingLink(group, chip_of_rank, t));
  }
  std::vector<int64_t> leaders;
  for (const auto& [chip, members] : by_chip) leaders.push_back(members.front());
  const double piece = static_cast<double>(bytes) / static_cast<double>(c);
  const double inside = 2.0 * RingNs(static_cast<double>(c - 1), piece, CoreLink(t));
  const double across = m > 1 ? RingNs(2.0 * static_cast<double>(m - 1), piece / static_cast<double>(m), RingLink(leaders, chip_of_rank, t)) : 0.0;
  return inside + across;
}

}  // namespace

double CollectiveNs(uint8_t kind, uint8_t algorithm, int64_t bytes, const std::vector<int64_t>& group,
                    const std::vector<int>& chip_of_rank, const TargetSpec& target) {
  const int64_t n = static_cast<int64_t>(group.size());
  if (n <= 1) return kCollectiveIssueNs;
  if (algorithm == kCollectiveHalvingDoubling) {
    const double half = HalvingNs(bytes, group, chip_of_rank, target);
    return kCollectiveIssueNs + (kind == kCollectiveAllReduce ? 2.0 * half : half);
  }
  if (algorithm == kCollectiveHierarchical) return kCollectiveIssueNs + HierarchicalNs(bytes, group, chip_of_rank, target);
  const Link link = RingLink(group, chip_of_rank, target);
  const double chunk = static_cast<double>(bytes) / static_cast<double>(n);
  const double steps = static_cast<double>(n - 1);
  switch (kind) {
    case kCollectiveAllReduce:  // ring reduce-scatter, then ring all-gather
      return kCollectiveIssueNs + RingNs(2.0 * steps, chunk, link);
    case kCollectivePermute:  // one hop, the whole buffer
      return kCollectiveIssueNs + RingNs(1.0, static_cast<double>(bytes), link);
    case kCollectiveBroadcast:  // a pipelined ring: n-1 hops, the buffer streamed once
      return kCollectiveIssueNs + steps * link.hop_ns + static_cast<double>(bytes) / link.bytes_per_ns;
    default:  // all-gather, reduce-scatter, all-to-all: n-1 steps of one chunk
      return kCollectiveIssueNs + RingNs(steps, chunk, link);
  }
}

}  // namespace trn::sim
