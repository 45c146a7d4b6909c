#include "interconnect_timing.h"

#include <algorithm>

#include "runtime.h"

namespace trn::sim {
namespace {

// Issuing a collective: its DMA descriptors are written like a hardware-descriptor DMA's
// (≈600 ns to issue, neuroncore.md "DMA"); charged once per collective.
constexpr double kCollectiveIssueNs = 600.0;
// One ring step between cores inside a node: "≈1–2 µs per hop inside a node" (neuroncore.md
// "Collectives"); est. the middle of that range.
constexpr double kHopInsideNodeNs = 1500.0;
// One ring step between nodes: "≈15 µs across nodes" (neuroncore.md "Collectives").
constexpr double kHopAcrossNodesNs = 15000.0;
// Chips per node (instance): trn1.32xlarge and trn2.48xlarge hold 16 (neuroncore.md).
constexpr int kChipsPerNode = 16;

// The slowest link of the ring the group forms, as (hop latency, bytes per ns). Cores of one
// chip move data through the chip's HBM with their DMA engines (est.: one core's DMA rate);
// chips through NeuronLink.
std::pair<double, double> RingLink(const std::vector<int64_t>& group,
                                   const std::vector<int>& chip_of_rank, const TargetSpec& t) {
  double hop = kHopInsideNodeNs;
  double rate = t.dma_bytes_per_ns_per_engine * t.dma_engines_per_core;
  const size_t n = group.size();
  for (size_t i = 0; i < n; ++i) {
    const int a = chip_of_rank[group[i]], b = chip_of_rank[group[(i + 1) % n]];
    if (a == b) continue;
    rate = std::min(rate, t.chip_link_bytes_per_ns);
    if (a / kChipsPerNode != b / kChipsPerNode) hop = kHopAcrossNodesNs;
  }
  return {hop, rate};
}

}  // namespace

double CollectiveNs(uint8_t kind, int64_t bytes, const std::vector<int64_t>& group,
                    const std::vector<int>& chip_of_rank, const TargetSpec& target) {
  const int64_t n = static_cast<int64_t>(group.size());
  if (n <= 1) return kCollectiveIssueNs;
  const auto [hop, rate] = RingLink(group, chip_of_rank, target);
  const double chunk = static_cast<double>(bytes) / static_cast<double>(n);
  double steps = static_cast<double>(n - 1), step_bytes = chunk;
  switch (kind) {
    case kCollectiveAllReduce:  // ring reduce-scatter, then ring all-gather
      steps = 2.0 * static_cast<double>(n - 1);
      break;
    case kCollectivePermute:  // one hop, the whole buffer
      steps = 1.0;
      step_bytes = static_cast<double>(bytes);
      break;
    case kCollectiveBroadcast:  // a pipelined ring: n-1 hops, the buffer streamed once
      return kCollectiveIssueNs + steps * hop + static_cast<double>(bytes) / rate;
    default:  // all-gather, reduce-scatter, all-to-all: n-1 steps of one chunk
      break;
  }
  return kCollectiveIssueNs + steps * (hop + step_bytes / rate);
}

}  // namespace trn::sim
