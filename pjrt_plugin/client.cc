#include "client.h"

#include <algorithm>
#include <cstring>

#include "compile_options.h"
#include "compiler_bridge.h"
#include "element_type.h"
#include "host_layout.h"
#include "sim/chip_topology.h"
#include "sim/program.h"

namespace trn::pjrt {

Client::Client(const ClientOptions& options) : options_(options) {
  const int per_chip = options.devices_per_chip();
  platform_version_ = std::string(options.target->name) + " (" + options.target->core_version +
                      ", " + std::to_string(options.chips) + " chip" +
                      (options.chips == 1 ? "" : "s") + ", LNC=" + std::to_string(options.lnc) +
                      ", " + std::to_string(per_chip) + " devices per chip, simulated)";
  executions_ = std::make_shared<sim::ExecutionIndex>(options.chips * per_chip);
  sim::ExecutionIndex::Register(executions_);
  for (int chip = 0; chip < options.chips; ++chip) {
    for (int core = 0; core < per_chip; ++core) {
      const int id = chip * per_chip + core;
      devices_.push_back(std::make_unique<Device>(
          id, chip, sim::ChipCoords(options.topology, chip), core, *options.target, options.lnc,
          options.hbm_bytes_per_device, 2 * id, executions_.get()));
      device_handles_.push_back(devices_.back().get());
      for (PJRT_Memory* memory : devices_.back()->memories()) memory_handles_.push_back(memory);
    }
  }
}

Client::~Client() {
  for (const auto& device : devices_) device->queue()->Stop();
}

StatusOr<Device*> Client::LookupDevice(int id) const {
  if (id < 0 || id >= static_cast<int>(devices_.size())) {
    return Status(StatusCode::kNotFound, "no trn device with id " + std::to_string(id) +
                                             "; ids are 0.." +
                                             std::to_string(devices_.size() - 1));
  }
  return devices_[id].get();
}

StatusOr<Client::Placement> Client::AssignedDevices(const CompileOptions& options) const {
  const int64_t partitions = std::max<int64_t>(options.num_partitions, 1);
  const int64_t replicas = partitions == 1 ? std::max<int64_t>(options.num_replicas, 1) : 1;
  const int64_t computations = partitions > 1 ? partitions : replicas;
  std::vector<int64_t> ids = options.assigned_devices;
  if (ids.empty()) {
    for (int64_t i = 0; i < computations; ++i) ids.push_back(i);
  }
  if (computations > 1 && static_cast<int64_t>(ids.size()) != computations) {
    return InvalidArgument("compile options assign " + std::to_string(ids.size()) + " devices to " +
                           std::to_string(computations) +
                           (partitions > 1 ? " partitions" : " replicas"));
  }
  if (computations == 1) ids.resize(1);
  std::vector<Device*> devices;
  for (int64_t id : ids) {
    StatusOr<Device*> device = LookupDevice(static_cast<int>(id));
    if (!device.ok()) {
      return InvalidArgument("compile options assign a device that does not exist: " +
                             device.status().message());
    }
    devices.push_back(*device);
  }
  if (replicas > 1) return Placement{{devices.front()}, std::move(devices)};
  return Placement{std::move(devices), {}};
}

StatusOr<std::unique_ptr<LoadedExecutable>> Client::LoadProgram(std::string_view program,
                                                                Placement placement) const {
  StatusOr<std::shared_ptr<const sim::LoadedProgram>> loaded =
      sim::LoadedProgram::Load(program.data(), program.size());
  if (!loaded.ok()) return loaded.status();
  const std::string_view program_target = (*loaded)->target().name;
  if (program_target != options_.target->name) {
    return InvalidArgument("the program was compiled for " + std::string(program_target) +
                           " but this client simulates " + options_.target->name);
  }
  // A program for an LNC=2 device's two physical cores needs a device that has them.
  if ((*loaded)->program().cores > options_.lnc) {
    return InvalidArgument("the program runs on " + std::to_string((*loaded)->program().cores) +
                           " physical cores but this client's devices are LNC=" + std::to_string(options_.lnc));
  }
  return LoadedExecutable::Load(std::move(*loaded), std::move(placement.devices),
                                std::move(placement.replicas));
}

StatusOr<std::unique_ptr<LoadedExecutable>> Client::Compile(std::string_view code,
                                                            std::string_view format,
                                                            std::string_view compile_options) {
  StatusOr<CompileOptions> options = ParseCompileOptions(compile_options);
  if (!options.ok()) return options.status();
  StatusOr<Placement> placement = AssignedDevices(*options);
  if (!placement.ok()) return placement.status();
  StatusOr<std::string> program = CompileInPython(code, format, *options, options_);
  if (!program.ok()) return program.status();
  StatusOr<std::unique_ptr<LoadedExecutable>> executable = LoadProgram(*program, std::move(*placement));
  if (!executable.ok() && executable.status().code() == StatusCode::kInvalidArgument) {
    // The compiler produced a program the runtime rejects: a compiler bug, not a user error.
    return Internal("the trn compiler produced an invalid program: " +
                    executable.status().message());
  }
  return executable;
}

StatusOr<std::unique_ptr<LoadedExecutable>> Client::DeserializeAndLoad(
    std::string_view program, std::string_view compile_options) {
  StatusOr<CompileOptions> options = ParseCompileOptions(compile_options);
  if (!options.ok()) return options.status();
  StatusOr<Placement> placement = AssignedDevices(*options);
  if (!placement.ok()) return placement.status();
  return LoadProgram(program, std::move(*placement));
}

namespace {

StatusOr<sim::DType> CheckedDeviceDType(PJRT_Buffer_Type type, const std::vector<int64_t>& dims,
                                        const PJRT_Buffer_MemoryLayout* device_layout,
                                        const Memory* memory, const ClientOptions& options) {
  // A torch_xla client's Python numbers, or every f64 array under TRN_FLOAT64=float32: HBM holds
  // their bytes; programs narrow them on load (narrow-float64).
  if (type == PJRT_Buffer_Type_F64 &&
      (options.float64_arrays || (options.float64_scalars && dims.empty()))) {
    return sim::DType::kF64;
  }
  StatusOr<sim::DType> dtype =
      DeviceDType(type, "a " + ShapeString(type, dims) + " array on " + memory->device()->name());
  if (!dtype.ok() || device_layout == nullptr) return dtype;
  const int64_t element_size = ElementSize(*dtype);
  StatusOr<std::vector<int64_t>> strides = HostByteStrides(device_layout, dims, element_size);
  if (!strides.ok() || *strides != DenseByteStrides(dims, element_size)) {
    return Unimplemented("device layouts other than dense row-major are not supported: "
                         "NeuronCore buffers are dense");
  }
  return dtype;
}

}  // namespace

StatusOr<std::unique_ptr<Buffer>> Client::BufferFromHost(
    const void* data, PJRT_Buffer_Type type, std::vector<int64_t> dims,
    std::vector<int64_t> byte_strides, const PJRT_Buffer_MemoryLayout* device_layout,
    Memory* memory) const {
  StatusOr<sim::DType> dtype = CheckedDeviceDType(type, dims, device_layout, memory, options_);
  if (!dtype.ok()) return dtype.status();
  if (byte_strides.empty()) {
    byte_strides = DenseByteStrides(dims, ElementSize(*dtype));
  } else if (byte_strides.size() != dims.size()) {
    return InvalidArgument(std::to_string(byte_strides.size()) + " byte strides for a rank-" +
                           std::to_string(dims.size()) + " array");
  }
  return Buffer::FromHost(data, *dtype, std::move(dims), byte_strides, memory);
}

StatusOr<std::unique_ptr<Buffer>> Client::UninitializedBuffer(
    PJRT_Buffer_Type type, std::vector<int64_t> dims,
    const PJRT_Buffer_MemoryLayout* device_layout, Memory* memory) const {
  StatusOr<sim::DType> dtype = CheckedDeviceDType(type, dims, device_layout, memory, options_);
  if (!dtype.ok()) return dtype.status();
  StatusOr<int64_t> size = DenseByteSize(*dtype, dims);
  if (!size.ok()) return size.status();
  StatusOr<std::shared_ptr<Allocation>> allocation = Allocation::Create(memory, *size);
  if (!allocation.ok()) return allocation.status();
  std::memset((*allocation)->data(), 0, *size);
  return std::make_unique<Buffer>(*dtype, std::move(dims), std::move(*allocation));
}

StatusOr<std::vector<int>> Client::DefaultDeviceAssignment(int num_replicas,
                                                           int num_partitions) const {
  if (num_replicas < 1 || num_partitions < 1) {
    return InvalidArgument("num_replicas and num_partitions must be positive, got " +
                           std::to_string(num_replicas) + " and " +
                           std::to_string(num_partitions));
  }
  const int64_t needed = static_cast<int64_t>(num_replicas) * num_partitions;
  if (needed > static_cast<int64_t>(devices_.size())) {
    return InvalidArgument(std::to_string(num_replicas) + " replicas x " +
                           std::to_string(num_partitions) + " partitions need " +
                           std::to_string(needed) + " devices; this client has " +
                           std::to_string(devices_.size()));
  }
  std::vector<int> assignment(needed);
  for (int64_t i = 0; i < needed; ++i) assignment[i] = static_cast<int>(i);
  return assignment;
}

}  // namespace trn::pjrt
