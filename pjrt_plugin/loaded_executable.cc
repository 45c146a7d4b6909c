#include "loaded_executable.h"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <new>

#include "compile_options.h"
#include "device.h"
#include "element_type.h"
#include "interrupt.h"

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

// One queued run: everything it touches is held here, so the buffers and the executable may be
// deleted or destroyed while it waits or runs.
struct QueuedExecution {
  std::shared_ptr<const sim::LoadedProgram> program;
  Device* device = nullptr;  // not owned; its queue runs this
  std::vector<std::shared_ptr<Allocation>> inputs, outputs;
  std::vector<std::shared_ptr<Completion>> inputs_ready;
  bool record_timeline = false;
  uint64_t interrupts = 0;  // InterruptCount() at submission: a later SIGINT cancels this run
  std::shared_ptr<Completion> done;
};

Status Simulate(const QueuedExecution& run) {
  for (size_t i = 0; i < run.inputs_ready.size(); ++i) {
    // On the same device the producer ran before (queue order); elsewhere this waits for it.
    const Status& input = run.inputs_ready[i]->Await();
    if (!input.ok()) {
      return Status(input.code(), "argument " + std::to_string(i) +
                                      " comes from an operation that failed: " + input.message());
    }
  }
  const sim::LoadedProgram& program = *run.program;
  StatusOr<Reservation> temporaries = run.device->hbm()->Reserve(program.temporary_bytes());
  if (!temporaries.ok()) {
    return Status(temporaries.status().code(),
                  "reserving the program's temporaries: " + temporaries.status().message());
  }
  std::vector<const void*> input_data;
  for (const auto& input : run.inputs) input_data.push_back(input->data());
  std::vector<void*> output_data;
  for (const auto& output : run.outputs) output_data.push_back(output->data());

  sim::ExecuteOptions options;
  options.record_timeline = run.record_timeline;
  const ExecutionQueue* queue = run.device->queue();
  options.cancelled = [&run, queue] {
    return InterruptCount() != run.interrupts || queue->stopping();
  };
  auto profile = std::make_shared<sim::ExecutionProfile>();
  const Status status = sim::Execute(program, input_data, output_data, options, profile.get());
  if (status.code() == StatusCode::kCancelled) {
    return Status(StatusCode::kCancelled,
                  (queue->stopping() ? "the client was destroyed: " : "interrupted (SIGINT): ") +
                      status.message());
  }
  TRN_RETURN_IF_ERROR(status);
  profile->program = run.program;
  run.device->PublishExecution(std::move(profile));  // complete: immutable from here on
  return Status::Ok();
}

// Simulate on the queue's thread, where nothing may escape.
Status RunQueued(const QueuedExecution& run) {
  try {
    return Simulate(run);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("the host ran out of memory while simulating the program");
  } catch (const std::exception& e) {
    return Internal(std::string("simulating the program: ") + e.what());
  } catch (...) {
    return Internal("simulating the program: unknown exception");
  }
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

StatusOr<LoadedExecutable::Execution> LoadedExecutable::Execute(
    Device* device, PJRT_Buffer* const* arguments, size_t num_arguments,
    const std::function<bool(size_t)>& may_donate) const {
  if (is_deleted()) return FailedPrecondition("the executable has been deleted");
  const sim::LoadedProgram& program = executable_.program();
  const std::vector<sim::TensorInfo>& parameters = program.parameters();
  if (num_arguments != parameters.size()) {
    return InvalidArgument("the program takes " + std::to_string(parameters.size()) +
                           " arguments, got " + std::to_string(num_arguments));
  }
  if (num_arguments > 0 && arguments == nullptr) return InvalidArgument("argument list is NULL");

  QueuedExecution run;
  run.program = executable_.shared_program();
  run.device = device;
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
    run.inputs.push_back(std::move(*allocation));
    run.inputs_ready.push_back(argument->ready());
  }
  std::vector<Buffer*> donated;
  for (const sim::TensorInfo& output : program.outputs()) {
    if (output.alias >= 0) {
      const size_t p = static_cast<size_t>(output.alias);
      Buffer* argument = Buffer::FromHandle(arguments[p]);
      const bool once = std::count(arguments, arguments + num_arguments, arguments[p]) == 1;
      if (may_donate(p) && once && argument->donatable()) {
        run.outputs.push_back(run.inputs[p]);  // the program updates it in place
        donated.push_back(argument);
        continue;
      }
    }
    StatusOr<std::shared_ptr<Allocation>> allocation =
        Allocation::Create(device->hbm(), output.byte_size);
    if (!allocation.ok()) {
      return Status(allocation.status().code(), "allocating output " +
                                                    std::to_string(run.outputs.size()) + ": " +
                                                    allocation.status().message());
    }
    run.outputs.push_back(std::move(*allocation));
  }
  run.record_timeline = sim::RecordTimelineRequested();  // TRN_PROFILE or profile.trace()
  run.interrupts = InterruptCount();
  run.done = Completion::Pending();

  Execution execution;
  execution.done = run.done;
  for (size_t i = 0; i < run.outputs.size(); ++i) {
    const sim::TensorInfo& info = program.outputs()[i];
    execution.outputs.push_back(
        std::make_unique<Buffer>(info.dtype, info.shape, run.outputs[i], run.done));
  }
  for (Buffer* argument : donated) argument->Delete();  // its bytes are the output's now
  WatchInterrupts();
  device->queue()->Submit([run = std::move(run)]() mutable {
    const Status status = RunQueued(run);
    // What the run held is released before anyone waiting on it wakes (HBM accounting).
    const std::shared_ptr<Completion> done = std::move(run.done);
    run = QueuedExecution{};
    done->Complete(status);
  });
  return execution;
}

}  // namespace trn::pjrt
