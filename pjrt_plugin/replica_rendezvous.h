// Replicated programs (torch_xla: num_replicas = N, num_partitions = 1) run as N separate
// PJRT_LoadedExecutable_Execute calls, one per device from one thread each, and each thread
// traces and compiles its own copy of the program (its HLO names, so its bytes, differ): the
// executions that meet at the collectives belong to different calls of different executables.
// The rendezvous pairs them up as XLA's does, by the devices and the order of runs: the g-th
// communicating execution on each device of a replica set shares that set's g-th
// CollectiveSession; the collectives' checks then find runs of programs that do not match
// (docs/multi-device.md, "Replicated programs").
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "sim/collectives.h"

namespace trn::pjrt {

class ReplicaRendezvous {
 public:
  // The process's one rendezvous: every executable's replicas meet there.
  static ReplicaRendezvous& Global();

  // The session of `rank`'s next execution over the `num_ranks` replicas `key` names (their
  // device ids); the first rank to arrive builds it with `make`.
  // The session is forgotten once every rank has joined it.
  std::shared_ptr<sim::CollectiveSession> Join(
      const std::string& key, int rank, int num_ranks,
      const std::function<std::shared_ptr<sim::CollectiveSession>()>& make);

 private:
  struct Pending {
    std::shared_ptr<sim::CollectiveSession> session;
    int joined = 0;
  };
  std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> executions_;  // (key, rank) -> runs so far
  std::map<std::pair<std::string, int64_t>, Pending> pending_;  // (key, run) -> its session
};

}  // namespace trn::pjrt
