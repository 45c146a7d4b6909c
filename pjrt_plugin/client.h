// PJRT_Client: the simulated Trainium machine of this process: `chips` chips of one generation,
// each exposing physical_cores_per_chip / LNC devices, and the entry points that make buffers
// and executables on them.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "buffer.h"
#include "client_options.h"
#include "compile_options.h"
#include "device.h"
#include "loaded_executable.h"
#include "pjrt_c_api.h"
#include "sim/status.h"

struct PJRT_Client {};

namespace trn::pjrt {

class Client : public PJRT_Client {
 public:
  explicit Client(const ClientOptions& options);
  // Stops every device's queue first, so no execution waits on a device already gone.
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const std::string& platform_name() const { return platform_name_; }
  const std::string& platform_version() const { return platform_version_; }
  const sim::TargetSpec& target() const { return *options_.target; }
  const std::vector<PJRT_Device*>& devices() const { return device_handles_; }
  const std::vector<PJRT_Memory*>& memories() const { return memory_handles_; }

  // NOT_FOUND naming the id and the valid range.
  StatusOr<Device*> LookupDevice(int id) const;

  // Compiles `code` ("mlir" or "hlo"; docs/compiler.md describes the compile entry point) with
  // the trn compiler and loads it on the device the compile options assign.
  StatusOr<std::unique_ptr<LoadedExecutable>> Compile(std::string_view code,
                                                      std::string_view format,
                                                      std::string_view compile_options);
  // Loads a program produced by Executable_Serialize (or by the compiler). `compile_options`
  // may be empty; when given, its device assignment picks the device.
  StatusOr<std::unique_ptr<LoadedExecutable>> DeserializeAndLoad(
      std::string_view program, std::string_view compile_options);

  // A copy of a host array in `memory`. `byte_strides` empty: dense row-major.
  // `device_layout` (may be NULL) must describe the dense row-major layout device buffers have.
  StatusOr<std::unique_ptr<Buffer>> BufferFromHost(const void* data, PJRT_Buffer_Type type,
                                                   std::vector<int64_t> dims,
                                                   std::vector<int64_t> byte_strides,
                                                   const PJRT_Buffer_MemoryLayout* device_layout,
                                                   Memory* memory) const;
  // A zero-filled buffer in `memory`.
  StatusOr<std::unique_ptr<Buffer>> UninitializedBuffer(
      PJRT_Buffer_Type type, std::vector<int64_t> dims,
      const PJRT_Buffer_MemoryLayout* device_layout, Memory* memory) const;

  // Device ids for a num_replicas x num_partitions computation, replica-major.
  StatusOr<std::vector<int>> DefaultDeviceAssignment(int num_replicas, int num_partitions) const;

 private:
  // Where an executable runs (the compile options' assignment, else the first devices).
  struct Placement {
    // One device, or for num_partitions > 1 one per partition in partition order.
    std::vector<Device*> devices;
    // For num_replicas > 1: one per replica in replica order (torch_xla's replicated programs).
    std::vector<Device*> replicas;
  };
  StatusOr<Placement> AssignedDevices(const CompileOptions& options) const;
  StatusOr<std::unique_ptr<LoadedExecutable>> LoadProgram(std::string_view program,
                                                          Placement placement) const;

  ClientOptions options_;
  std::string platform_name_ = "trn";
  std::string platform_version_;
  // Each device's latest completed execution; declared before devices_, which point at it.
  std::shared_ptr<sim::ExecutionIndex> executions_;
  std::vector<std::unique_ptr<Device>> devices_;  // owned; created with the client, by id
  std::vector<PJRT_Device*> device_handles_;
  std::vector<PJRT_Memory*> memory_handles_;  // every device's memories, by id
};

}  // namespace trn::pjrt
