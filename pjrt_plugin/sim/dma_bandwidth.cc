#include "dma_bandwidth.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace trn::sim {
namespace {

// est.: the slot length. Shorter slots resolve contention between queues more finely and cost
// host memory (one double per slot and resource for the whole execution); a lone transfer is
// exact whatever the length. 256 ns is about one 2 KiB-per-partition tile load on a full core.
constexpr double kSlotNs = 256;

}  // namespace

SlotLedger::SlotLedger(double bytes_per_ns) : capacity_(bytes_per_ns * kSlotNs) {}

double SlotLedger::Free(size_t slot) {
  return slot < used_.size() ? std::max(0.0, capacity_ - used_[slot]) : capacity_;
}

void SlotLedger::Take(size_t slot, double bytes) {
  if (slot >= used_.size()) used_.resize(slot + 1, 0.0);
  used_[slot] += bytes;
}

ChipHbmBandwidth::ChipHbmBandwidth(const TargetSpec& target)
    : ledger_(target.hbm_bytes_per_ns_per_chip) {}

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
