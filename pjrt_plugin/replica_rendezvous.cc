#include "replica_rendezvous.h"

namespace trn::pjrt {

ReplicaRendezvous& ReplicaRendezvous::Global() {
  static ReplicaRendezvous* rendezvous = new ReplicaRendezvous;  // never destroyed: queues outlive exit
  return *rendezvous;
}

std::shared_ptr<sim::CollectiveSession> ReplicaRendezvous::Join(
    const std::string& key, int rank, int num_ranks,
    const std::function<std::shared_ptr<sim::CollectiveSession>()>& make) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t run = executions_[{key, rank}]++;
  const auto at = std::make_pair(key, run);
  Pending& pending = pending_[at];
  if (pending.session == nullptr) pending.session = make();
  std::shared_ptr<sim::CollectiveSession> session = pending.session;
  if (++pending.joined == num_ranks) pending_.erase(at);
  return session;
}

}  // namespace trn::pjrt
