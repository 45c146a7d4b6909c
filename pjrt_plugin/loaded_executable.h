// PJRT_LoadedExecutable: a program loaded for one device, its constants resident in that
// device's HBM, ready to run on argument buffers.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "buffer.h"
#include "event.h"
#include "executable.h"
#include "host_callback_bridge.h"
#include "memory.h"
#include "pjrt_c_api.h"
#include "sim/collectives.h"
#include "sim/status.h"

struct PJRT_LoadedExecutable {};

namespace trn::pjrt {

class Device;

class LoadedExecutable : public PJRT_LoadedExecutable {
 public:
  // RESOURCE_EXHAUSTED when the program's constants do not fit in `device`'s HBM.
  // `devices`: one for a single-core program, else the cores of one execution in rank order.
  // `replicas`: a replicated program's devices in replica order (empty for one replica); a
  // replicated program whose replicas communicate runs on each of them as rank = its replica.
  static StatusOr<std::unique_ptr<LoadedExecutable>> Load(
      std::shared_ptr<const sim::LoadedProgram> program, std::vector<Device*> devices,
      std::vector<Device*> replicas = {});

  Executable* executable() { return &executable_; }
  Device* device() const { return devices_.front(); }
  const std::vector<Device*>& devices() const { return devices_; }
  const std::vector<PJRT_Device*>& addressable_devices() const { return addressable_devices_; }
  std::string SerializedDeviceAssignment() const;

  void Delete();
  bool is_deleted() const { return deleted_.load(); }

  struct Execution {
    std::vector<std::unique_ptr<Buffer>> outputs;  // new buffers in the device's HBM
    std::shared_ptr<Completion> done;              // also the outputs' ready completion
  };
  // Queues one run of the program on `device` (this executable's device unless the caller names
  // another one, as PJRT allows for portable executables) and returns at once. Every argument is
  // checked against the program's parameters first, and the outputs are allocated: a failure
  // there is returned and leaves every buffer and the executable as they were. What fails later
  // (an argument whose producer failed, temporaries not fitting in HBM, a simulator error, an
  // interrupt) completes `done` with the error, which the outputs then carry.
  // A replicated program with collectives (or replica_id) runs on `device` as its replica's rank,
  // meeting the same program's runs on the other replicas (replica_rendezvous.h); `device` must
  // be one of its replicas.
  // Donation: an output that reuses a donated parameter's buffer (a DONATED_PARAMETER tensor)
  // takes over argument p's bytes when `may_donate(p)` (not in PJRT's non_donatable list), the
  // buffer appears once among the arguments and is donatable(); the argument buffer is then
  // deleted, as PJRT's donation semantics say. Otherwise the output gets fresh bytes that start as
  // a copy of the argument (correct, not in place).
  StatusOr<Execution> Execute(Device* device, PJRT_Buffer* const* arguments, size_t num_arguments,
                              const std::function<bool(size_t)>& may_donate) const;

  // One execution of a multi-core program: argument_lists[r] are core r's arguments (on
  // devices()[r]); every core's run is queued on its device and they meet at the collectives.
  // A core that fails makes the others' waits fail (never hang). Argument checks are done for
  // every core before anything is queued (and before any donated argument is taken over).
  StatusOr<std::vector<Execution>> ExecuteOnAllCores(PJRT_Buffer* const* const* argument_lists,
                                                     size_t num_arguments,
                                                     const std::function<bool(size_t)>& may_donate) const;

 private:
  LoadedExecutable(std::shared_ptr<const sim::LoadedProgram> program, std::vector<Device*> devices,
                   std::vector<Device*> replicas, sim::Interconnect replica_net,
                   std::vector<Reservation> constants);

  // The session `device`'s run of a communicating replicated program joins (null otherwise) and
  // the rank it runs as.
  StatusOr<std::pair<std::shared_ptr<sim::CollectiveSession>, int>> ReplicaSession(
      const Device* device) const;

  // Keeps the program's host callbacks registered (null without any); queued runs share it.
  std::shared_ptr<HostCallbackLease> host_callbacks_;
  Executable executable_;
  const std::vector<Device*> devices_;  // not owned; owned by the client
  std::vector<PJRT_Device*> addressable_devices_;  // devices_
  const std::vector<Device*> replicas_;  // not owned; empty unless replicated
  const sim::Interconnect replica_net_;  // how replicas_ are wired (communicating programs only)
  const std::string replica_key_;  // what names replicas_ in the rendezvous
  std::vector<Reservation> constants_;  // the program's constants in each device's HBM while loaded
  std::atomic<bool> deleted_{false};
};

}  // namespace trn::pjrt
