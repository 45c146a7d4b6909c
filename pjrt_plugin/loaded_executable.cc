#include "loaded_executable.h"

#include <cstdlib>

#include "compile_options.h"
#include "device.h"
#include "element_type.h"

namespace trn::pjrt {
namespace {

std::string ParameterString(const sim::TensorInfo& info) {
  return ShapeString(static_cast<PJRT_Buffer_Type>(info.dtype), info.shape);
}

Status CheckArgument(size_t index, const Buffer* argument, const sim::TensorInfo& parameter,
                     const Device* device) {
  const std::string where = "argument " + std::to_string(index) + " (" + parameter.name + ")";
  if (argument == nullptr) return InvalidArgument(where + " is NULL");
  if (argument->dtype() != parameter.dtype || argument->dims() != parameter.shape) {
    return InvalidArgument(where + ": expected " + ParameterString(parameter) + ", got " +
                           ShapeString(argument->element_type(), argument->dims()));
  }
  if (argument->device() != device) {
    return InvalidArgument(where + " is on " + argument->device()->name() +
                           " but the executable runs on " + device->name() +
                           "; transfer it first (jax.device_put)");
  }
  if (argument->memory()->kind() != MemoryKind::kDevice) {
    return InvalidArgument(where + " is in " + argument->memory()->kind_name() +
                           " memory; NeuronCore programs read their arguments from device (HBM)"
                           " memory");
  }
  return Status::Ok();
}

}  // namespace

LoadedExecutable::LoadedExecutable(std::shared_ptr<const sim::LoadedProgram> program,
                                   Device* device, Reservation constants)
    : executable_(std::move(program)),
      device_(device),
      addressable_devices_{device},
      constants_(std::move(constants)) {}

StatusOr<std::unique_ptr<LoadedExecutable>> LoadedExecutable::Load(
    std::shared_ptr<const sim::LoadedProgram> program, Device* device) {
  StatusOr<Reservation> constants = device->hbm()->Reserve(program->constant_bytes());
  if (!constants.ok()) {
    return Status(constants.status().code(),
                  "loading the program's constants: " + constants.status().message());
  }
  return std::unique_ptr<LoadedExecutable>(
      new LoadedExecutable(std::move(program), device, std::move(*constants)));
}

std::string LoadedExecutable::SerializedDeviceAssignment() const {
  return SingleDeviceAssignmentProto(device_->id());
}

void LoadedExecutable::Delete() {
  deleted_.store(true);
}

StatusOr<std::vector<std::unique_ptr<Buffer>>> LoadedExecutable::Execute(
    Device* device, PJRT_Buffer* const* arguments, size_t num_arguments) const {
  if (is_deleted()) return FailedPrecondition("the executable has been deleted");
  const sim::LoadedProgram& program = executable_.program();
  const std::vector<sim::TensorInfo>& parameters = program.parameters();
  if (num_arguments != parameters.size()) {
    return InvalidArgument("the program takes " + std::to_string(parameters.size()) +
                           " arguments, got " + std::to_string(num_arguments));
  }
  if (num_arguments > 0 && arguments == nullptr) return InvalidArgument("argument list is NULL");

  // Holding the allocations keeps the bytes alive even if a buffer is deleted meanwhile.
  std::vector<std::shared_ptr<Allocation>> inputs;
  std::vector<const void*> input_data;
  for (size_t i = 0; i < num_arguments; ++i) {
    const Buffer* argument = Buffer::FromHandle(arguments[i]);
    if (argument == nullptr && arguments[i] != nullptr) {
      return InvalidArgument("argument " + std::to_string(i) +
                             " is not a buffer of this trn client (an array of another backend, "
                             "e.g. the CPU?): move it to a trn device first (jax.device_put)");
    }
    TRN_RETURN_IF_ERROR(CheckArgument(i, argument, parameters[i], device));
    StatusOr<std::shared_ptr<Allocation>> allocation = argument->allocation();
    if (!allocation.ok()) {
      return Status(allocation.status().code(),
                    "argument " + std::to_string(i) + ": " + allocation.status().message());
    }
    input_data.push_back((*allocation)->data());
    inputs.push_back(std::move(*allocation));
  }

  StatusOr<Reservation> temporaries = device->hbm()->Reserve(program.temporary_bytes());
  if (!temporaries.ok()) {
    return Status(temporaries.status().code(),
                  "reserving the program's temporaries: " + temporaries.status().message());
  }
  std::vector<std::shared_ptr<Allocation>> outputs;
  std::vector<void*> output_data;
  for (const sim::TensorInfo& output : program.outputs()) {
    StatusOr<std::shared_ptr<Allocation>> allocation =
        Allocation::Create(device->hbm(), output.byte_size);
    if (!allocation.ok()) {
      return Status(allocation.status().code(), "allocating output " +
                                                    std::to_string(outputs.size()) + ": " +
                                                    allocation.status().message());
    }
    output_data.push_back((*allocation)->data());
    outputs.push_back(std::move(*allocation));
  }

  sim::ExecuteOptions options;
  options.record_timeline = sim::RecordTimelineRequested();  // TRN_PROFILE or profile.trace()
  auto profile = std::make_shared<sim::ExecutionProfile>();
  TRN_RETURN_IF_ERROR(sim::Execute(program, input_data, output_data, options, profile.get()));
  profile->program = executable_.shared_program();
  device->PublishExecution(std::move(profile));  // complete: immutable from here on

  std::vector<std::unique_ptr<Buffer>> results;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const sim::TensorInfo& info = program.outputs()[i];
    results.push_back(std::make_unique<Buffer>(info.dtype, info.shape, std::move(outputs[i])));
  }
  return results;
}

}  // namespace trn::pjrt
