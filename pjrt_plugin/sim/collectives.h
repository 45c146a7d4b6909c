// Collectives between the simulated cores of one execution (docs/multi-device.md): every core
// runs the same program on its own thread; at a `collective` instruction each core deposits its
// operand in the execution's CollectiveSession and waits, bounded, for the other members of its
// replica group, then computes its own result from everyone's operands in group order.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "dtype.h"
#include "interconnect_timing.h"
#include "machine.h"
#include "program.h"
#include "runtime.h"
#include "status.h"
#include "timing_model.h"

namespace trn::sim {

// What one core brings to one collective.
struct CollectiveContribution {
  std::shared_ptr<const std::vector<uint8_t>> data;  // its operand, dense row-major
  std::vector<int64_t> shape;
  DType dtype = DType::kInvalid;
  uint8_t kind = 0;
  uint32_t channel = 0;
  uint32_t debug_id = 0;
  double arrive_ns = 0;  // its modeled time when it reached the collective
};

// A group's reduction, computed once by whichever member gets there first and shared by all.
struct SharedReduction {
  std::once_flag once;
  std::vector<uint8_t> bytes;
};

// The rendezvous of the cores of one execution. Thread-safe; shared by the cores' executions.
class TRN_API CollectiveSession {
 public:
  // `net.chip_of_rank[r]`: the chip core r is on, `net.topology` how the chips are wired;
  // `timeout_s`: how long a core waits for its peers before failing (0:
  // TRN_COLLECTIVE_TIMEOUT_S, else 60 s).
  CollectiveSession(Interconnect net, const TargetSpec& target, double timeout_s = 0);

  int num_ranks() const { return static_cast<int>(net_.chip_of_rank.size()); }
  const Interconnect& interconnect() const { return net_; }
  const TargetSpec& target() const { return target_; }

  // A core's execution failed: every core waiting now, or later, fails with this message.
  void Fail(int rank, const std::string& message);

  // Deposits `mine` as rank's part of its `sequence`-th collective (counted per core) and waits
  // until every rank of `group` has deposited, or the wait times out, a core fails, or
  // `cancelled` returns true. Returns the group's contributions in group order. `what` names the
  // collective in errors. *reduction is the group's shared reduction slot.
  StatusOr<std::vector<CollectiveContribution>> Exchange(int rank, int64_t sequence,
                                                         const std::vector<int64_t>& group,
                                                         CollectiveContribution mine,
                                                         const std::string& what,
                                                         const std::function<bool()>& cancelled,
                                                         std::shared_ptr<SharedReduction>* reduction);

 private:
  struct Slot {
    std::map<int64_t, CollectiveContribution> by_rank;
    size_t fetched = 0;
    std::shared_ptr<SharedReduction> reduction = std::make_shared<SharedReduction>();
  };
  const Interconnect net_;
  const TargetSpec& target_;
  const double timeout_s_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<int64_t, int64_t>, Slot> slots_;  // (sequence, group's first rank)
  std::string failure_;
};

// Runs a `collective` instruction on `machine` (rank machine.rank of machine.collectives; a
// machine without a session is rank 0 of a one-core execution) starting at `start_ns`; its
// timing is that of the collective, which starts when the group's last member arrives.
// *stats: its algorithm, group size, wait for the slowest peer and link utilization.
StatusOr<InstructionTiming> RunCollective(Machine& machine, const Instruction& inst, double start_ns,
                                          const ExecuteOptions& options,
                                          InstructionRecord::Collective* stats);

// partition_id: dst = the machine's rank.
void RunPartitionId(Machine& machine, const PartitionId& p);

}  // namespace trn::sim
