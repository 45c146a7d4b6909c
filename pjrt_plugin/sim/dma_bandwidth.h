// Shared DMA bandwidth (docs/timing-model.md). Each transfer streams at its own rate (the engines
// it is spread over × the per-engine rate × its run efficiency), but all DMA queues of a core
// together stream at most the core's DMA bandwidth, and all cores of a chip together move at most
// the chip's HBM bandwidth. Time is cut into fixed slots; a transfer fills the slots from its start
// in the order the executor schedules transfers (earliest start first), so the result is
// deterministic, and a transfer that nothing else contends with ends exactly at bytes / rate.
#pragma once

#include <cstddef>
#include <deque>

#include "target_spec.h"

namespace trn::sim {

// Bytes a resource can still move in each time slot. Only a window of recent slots is kept
// (host memory stays bounded however long the execution): transfers are scheduled in about
// time order, so none starts far behind the latest one.
class SlotLedger {
 public:
  explicit SlotLedger(double bytes_per_ns);
  double Free(size_t slot);
  void Take(size_t slot, double bytes);

 private:
  double capacity_;          // bytes per slot
  size_t first_ = 0;         // the slot used_.front() is; earlier slots are forgotten (free)
  std::deque<double> used_;  // bytes taken per slot from first_, grown on demand
};

// One per execution: the chip's HBM bandwidth its cores draw on. A program on several physical
// cores (an LNC=2 device) gets the device's share of the chip (its cores of the chip's); a
// one-core program the whole chip, which its core's DMA bandwidth never reaches (on trn2 368 GB/s
// against a share of 362.5: kept so, LNC=1 timing stays as calibrated).
class ChipHbmBandwidth {
 public:
  ChipHbmBandwidth(const TargetSpec& target, int cores);
  SlotLedger& ledger() { return ledger_; }

 private:
  SlotLedger ledger_;
};

// One per physical core: its DMA engines' aggregate bandwidth, drawing on its chip's HBM.
class CoreDmaBandwidth {
 public:
  CoreDmaBandwidth(const TargetSpec& target, ChipHbmBandwidth* chip);
  // When a transfer of `bytes` starting at `start_ns` finishes, streaming at most `rate` bytes/ns
  // (its engines' rate after the descriptor overhead of its runs). Its bytes count against the
  // core's bandwidth and, `hbm_crossings` times (0 SBUF->SBUF, 1 to/from HBM, 2 HBM->HBM), the
  // chip's. Payload bytes are what is charged: a descriptor-bound transfer (short runs) is slow
  // itself but does not reserve the engines' future slots ahead of the queues that follow it
  // (the engines serve queues round-robin; greedy slot reservation would starve them).
  double Transfer(double start_ns, double bytes, double rate, int hbm_crossings);

 private:
  SlotLedger engines_;
  ChipHbmBandwidth* chip_;
};

}  // namespace trn::sim
