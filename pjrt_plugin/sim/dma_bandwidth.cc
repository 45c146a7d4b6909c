#include "dma_bandwidth.h"

#include <algorithm>
#include <cmath>

namespace trn::sim {
namespace {

// est.: the slot length. Shorter slots resolve contention between queues more finely and cost
// host time and memory (one double per kept slot and resource); a lone transfer is exact
// whatever the length. 256 ns is about one 2 KiB-per-partition tile load on a full core.
constexpr double kSlotNs = 256;
// est.: slots kept behind the latest one touched, ~1 ms: far more than any instruction's reach
// back in time in the executor's earliest-start-first order.
constexpr size_t kKeptSlots = 4096;

}  // namespace

SlotLedger::SlotLedger(double bytes_per_ns) : capacity_(bytes_per_ns * kSlotNs) {}

double SlotLedger::Free(size_t slot) {
  if (slot < first_ || slot >= first_ + used_.size()) return capacity_;
  return std::max(0.0, capacity_ - used_[slot - first_]);
}

void SlotLedger::Take(size_t slot, double bytes) {
  if (slot < first_) return;
  if (slot >= first_ + kKeptSlots) {  // forget the slots more than kKeptSlots behind this one
    const size_t first = slot + 1 - kKeptSlots;
    used_.erase(used_.begin(), used_.begin() + static_cast<std::ptrdiff_t>(std::min(used_.size(), first - first_)));
    first_ = first;
  }
  if (slot - first_ >= used_.size()) used_.resize(slot - first_ + 1, 0.0);
  used_[slot - first_] += bytes;
}

ChipHbmBandwidth::ChipHbmBandwidth(const TargetSpec& target, int cores)
    : ledger_(cores > 1 ? target.hbm_bytes_per_ns_per_chip * cores / target.physical_cores_per_chip
                        : target.hbm_bytes_per_ns_per_chip) {}

CoreDmaBandwidth::CoreDmaBandwidth(const TargetSpec& target, ChipHbmBandwidth* chip)
    : engines_(target.dma_bytes_per_ns_per_engine * target.dma_engines_per_core), chip_(chip) {}

double CoreDmaBandwidth::Transfer(double start_ns, double bytes, double rate, int hbm_crossings) {
  double remaining = bytes;
  double t = start_ns;
  bool contended = false;  // some slot had less to give than the transfer's own rate
  while (remaining > 0) {
    const auto slot = static_cast<size_t>(std::floor(t / kSlotNs));
    const double span = (static_cast<double>(slot) + 1) * kSlotNs - t;
    double fits = std::min(rate * span, engines_.Free(slot));
    if (hbm_crossings > 0) fits = std::min(fits, chip_->ledger().Free(slot) / hbm_crossings);
    contended = contended || fits < rate * span;
    if (fits >= remaining) {
      engines_.Take(slot, remaining);
      if (hbm_crossings > 0) chip_->ledger().Take(slot, remaining * hbm_crossings);
      // Ends inside this slot, at the rate the slot allows; a lone transfer at exactly its own.
      return contended ? t + remaining * span / fits : start_ns + bytes / rate;
    }
    engines_.Take(slot, fits);
    if (hbm_crossings > 0) chip_->ledger().Take(slot, fits * hbm_crossings);
    remaining -= fits;
    t = (static_cast<double>(slot) + 1) * kSlotNs;
  }
  return t;
}

}  // namespace trn::sim
