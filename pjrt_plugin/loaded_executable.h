// PJRT_LoadedExecutable: a program loaded for one device, its constants resident in that
// device's HBM, ready to run on argument buffers.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "buffer.h"
#include "event.h"
#include "executable.h"
#include "host_callback_bridge.h"
#include "memory.h"
#include "pjrt_c_api.h"
#include "sim/status.h"

struct PJRT_LoadedExecutable {};

namespace trn::pjrt {

class Device;

class LoadedExecutable : public PJRT_LoadedExecutable {
 public:
  // RESOURCE_EXHAUSTED when the program's constants do not fit in `device`'s HBM.
  // `devices`: one for a single-core program, else the cores of one execution in rank order.
  static StatusOr<std::unique_ptr<LoadedExecutable>> Load(
      std::shared_ptr<const sim::LoadedProgram> program, std::vector<Device*> devices);

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
                   std::vector<Reservation> constants);

  // Keeps the program's host callbacks registered (null without any); queued runs share it.
  std::shared_ptr<HostCallbackLease> host_callbacks_;
  Executable executable_;
  const std::vector<Device*> devices_;  // not owned; owned by the client
  std::vector<PJRT_Device*> addressable_devices_;  // devices_
  std::vector<Reservation> constants_;  // the program's constants in each device's HBM while loaded
  std::atomic<bool> deleted_{false};
};

}  // namespace trn::pjrt
