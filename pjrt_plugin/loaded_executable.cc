#include "loaded_executable.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <new>

#include "compile_options.h"
#include "device.h"
#include "element_type.h"
#include "host_callback_bridge.h"
#include "interrupt.h"
#include "replica_rendezvous.h"
#include "sim/collectives.h"
#include "trace_capture.h"

namespace trn::pjrt {
namespace {

std::string ParameterString(const sim::TensorInfo& info) {
  return ShapeString(static_cast<PJRT_Buffer_Type>(info.dtype), info.shape);
}

Status CheckArgument(size_t index, const Buffer* argument, const sim::TensorInfo& parameter,
                     const Device* device) {
  const std::string where = "argument " + std::to_string(index) + " (" + parameter.name + ")";
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
  std::shared_ptr<sim::CollectiveSession> collectives;  // multi-core executions only
  int rank = 0;
  // Programs with host callbacks only: the registry's lease, and the permit to call Python
  // (null when queued while the interpreter exits; jax_trn's exit hook waits for it otherwise).
  std::shared_ptr<sim::HostCallPermit> python;
  std::shared_ptr<HostCallbackLease> host_callbacks;
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
  options.collectives = run.collectives;
  options.rank = run.rank;
  options.host_callback = [&run](const sim::HostCallbackCall& call) {
    return RunHostCallbackInPython(run.python.get(), call);
  };
  auto profile = std::make_shared<sim::ExecutionProfile>();
  const int64_t host_start_ns = HostClockNs();  // where a jax.profiler trace places it
  const Status status = sim::Execute(program, input_data, output_data, options, profile.get());
  // Cancelled by `options.cancelled` (named here), or by a host callback, whose message says why.
  if (status.code() == StatusCode::kCancelled && queue->stopping()) {
    return Status(StatusCode::kCancelled, "the client was destroyed: " + status.message());
  }
  if (status.code() == StatusCode::kCancelled && InterruptCount() != run.interrupts) {
    return Status(StatusCode::kCancelled, "interrupted (SIGINT): " + status.message());
  }
  TRN_RETURN_IF_ERROR(status);
  profile->program = run.program;
  TraceSession::Capture(
      {run.device->id(), run.device->name(), host_start_ns, run.record_timeline, profile});
  run.device->PublishExecution(std::move(profile));  // complete: immutable from here on
  return Status::Ok();
}

Status SimulateGuarded(const QueuedExecution& run) {
  try {
    return Simulate(run);
  } catch (abi::__forced_unwind&) {
    throw;  // Python ends a thread that asks for the GIL while the interpreter exits
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("the host ran out of memory while simulating the program");
  } catch (const std::exception& e) {
    return Internal(std::string("simulating the program: ") + e.what());
  } catch (...) {
    return Internal("simulating the program: unknown exception");
  }
}

// Simulate on the queue's thread, where nothing may escape. A failing core of a multi-core
// execution releases the others from their collectives.
Status RunQueued(const QueuedExecution& run) {
  const Status status = SimulateGuarded(run);
  if (!status.ok() && run.collectives != nullptr) run.collectives->Fail(run.rank, status.message());
  return status;
}

// Whether the program meets other cores: a collective, or a partition_id (its rank).
bool Communicates(const sim::Program& program) {
  for (const sim::Block& block : program.blocks) {
    for (const std::vector<sim::Instruction>& stream : block.streams) {
      for (const sim::Instruction& inst : stream) {
        if (inst.opcode == sim::Opcode::kCollective || inst.opcode == sim::Opcode::kPartitionId) {
          return true;
        }
      }
    }
  }
  return false;
}

// The chips `devices` (in rank order) sit on and how they are wired.
StatusOr<sim::Interconnect> InterconnectOf(const std::vector<Device*>& devices,
                                           const sim::TargetSpec& target) {
  sim::Interconnect net;
  for (const Device* device : devices) net.chip_of_rank.push_back(device->chip());
  const int chips = 1 + *std::max_element(net.chip_of_rank.begin(), net.chip_of_rank.end());
  StatusOr<sim::ChipTopology> topology = sim::TopologyOf(target, chips);
  if (!topology.ok()) return topology.status();
  net.topology = *topology;
  return net;
}

std::string DeviceNames(const std::vector<Device*>& devices) {
  std::string names;
  for (const Device* device : devices) names += (names.empty() ? "" : ", ") + device->name();
  return names;
}

}  // namespace

LoadedExecutable::LoadedExecutable(std::shared_ptr<const sim::LoadedProgram> program,
                                   std::vector<Device*> devices, std::vector<Device*> replicas,
                                   sim::Interconnect replica_net,
                                   std::vector<Reservation> constants)
    : host_callbacks_(HostCallbackLease::ForProgram(*program)),
      executable_(std::move(program), static_cast<int>(devices.size())),
      devices_(std::move(devices)),
      addressable_devices_(devices_.begin(), devices_.end()),
      replicas_(std::move(replicas)),
      replica_net_(std::move(replica_net)),
      replica_key_([this] {
        std::string key;
        for (const Device* device : replicas_) key += std::to_string(device->id()) + ",";
        return key;
      }()),
      constants_(std::move(constants)) {}

StatusOr<std::unique_ptr<LoadedExecutable>> LoadedExecutable::Load(
    std::shared_ptr<const sim::LoadedProgram> program, std::vector<Device*> devices,
    std::vector<Device*> replicas) {
  // Replicas matter only to a program that communicates; any device runs the others.
  if (replicas.size() < 2 || !Communicates(program->program())) replicas.clear();
  sim::Interconnect replica_net;
  if (!replicas.empty()) {
    StatusOr<sim::Interconnect> net = InterconnectOf(replicas, program->target());
    if (!net.ok()) return net.status();
    replica_net = std::move(*net);
  }
  std::vector<Reservation> reservations;
  for (Device* device : devices) {
    StatusOr<Reservation> constants = device->hbm()->Reserve(program->constant_bytes());
    if (!constants.ok()) {
      return Status(constants.status().code(), "loading the program's constants on " +
                                                   device->name() + ": " + constants.status().message());
    }
    reservations.push_back(std::move(*constants));
  }
  return std::unique_ptr<LoadedExecutable>(
      new LoadedExecutable(std::move(program), std::move(devices), std::move(replicas),
                           std::move(replica_net), std::move(reservations)));
}

StatusOr<std::pair<std::shared_ptr<sim::CollectiveSession>, int>> LoadedExecutable::ReplicaSession(
    const Device* device) const {
  if (replicas_.empty()) return std::make_pair(std::shared_ptr<sim::CollectiveSession>(), 0);
  const auto at = std::find(replicas_.begin(), replicas_.end(), device);
  if (at == replicas_.end()) {
    return InvalidArgument("the program communicates between its " +
                           std::to_string(replicas_.size()) + " replicas (" +
                           DeviceNames(replicas_) + "), and " + device->name() +
                           " is not one of them");
  }
  const int rank = static_cast<int>(at - replicas_.begin());
  std::shared_ptr<sim::CollectiveSession> session = ReplicaRendezvous::Global().Join(
      replica_key_, rank, static_cast<int>(replicas_.size()), [this] {
        return std::make_shared<sim::CollectiveSession>(replica_net_, executable_.program().target());
      });
  return std::make_pair(std::move(session), rank);
}

std::string LoadedExecutable::SerializedDeviceAssignment() const {
  std::vector<int> ids;
  for (const Device* device : devices_) ids.push_back(device->id());
  return PartitionedDeviceAssignmentProto(ids);
}

void LoadedExecutable::Delete() {
  deleted_.store(true);
}

namespace {

// One core's run, ready to queue; what the caller gets back; the arguments it takes over.
struct PreparedRun {
  QueuedExecution run;
  LoadedExecutable::Execution execution;
  std::vector<Buffer*> donated;  // deleted once every core's run is prepared
};

// Checks one core's arguments and allocates its outputs (or takes a donated argument's bytes).
StatusOr<PreparedRun> PrepareRun(const Executable& executable,
                                 const std::shared_ptr<HostCallbackLease>& host_callbacks, Device* device,
                                 PJRT_Buffer* const* arguments, size_t num_arguments,
                                 const std::function<bool(size_t)>& may_donate) {
  const sim::LoadedProgram& program = executable.program();
  const std::vector<sim::TensorInfo>& parameters = program.parameters();
  if (num_arguments != parameters.size()) {
    return InvalidArgument("the program takes " + std::to_string(parameters.size()) +
                           " arguments, got " + std::to_string(num_arguments));
  }
  if (num_arguments > 0 && arguments == nullptr) return InvalidArgument("argument list is NULL");

  QueuedExecution run;
  run.program = executable.shared_program();
  run.host_callbacks = host_callbacks;
  if (host_callbacks != nullptr) run.python = sim::HostCallPermit::Acquire();
  run.device = device;
  for (size_t i = 0; i < num_arguments; ++i) {
    const Buffer* argument = Buffer::FromHandle(arguments[i]);
    // JAX's C-API layer hands over another backend's array as a foreign pointer or as NULL.
    if (argument == nullptr) {
      return InvalidArgument("argument " + std::to_string(i) + " is not a buffer of this trn client (" +
                             (arguments[i] == nullptr ? "NULL; " : "") +
                             "an array of another backend, e.g. the CPU?): move it to a trn device "
                             "first (jax.device_put)");
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

  LoadedExecutable::Execution execution;
  execution.done = run.done;
  for (size_t i = 0; i < run.outputs.size(); ++i) {
    const sim::TensorInfo& info = program.outputs()[i];
    execution.outputs.push_back(
        std::make_unique<Buffer>(info.dtype, info.shape, run.outputs[i], run.done));
  }
  return PreparedRun{std::move(run), std::move(execution), std::move(donated)};
}

void Submit(QueuedExecution run) {
  WatchInterrupts();
  Device* device = run.device;
  device->queue()->Submit([run = std::move(run)]() mutable {
    const Status status = RunQueued(run);
    // What the run held is released before anyone waiting on it wakes (HBM accounting).
    const std::shared_ptr<Completion> done = std::move(run.done);
    run = QueuedExecution{};
    done->Complete(status);
  });
}

void TakeOver(const std::vector<Buffer*>& donated) {
  for (Buffer* argument : donated) argument->Delete();  // its bytes are the output's now
}

}  // namespace

StatusOr<LoadedExecutable::Execution> LoadedExecutable::Execute(
    Device* device, PJRT_Buffer* const* arguments, size_t num_arguments,
    const std::function<bool(size_t)>& may_donate) const {
  if (is_deleted()) return FailedPrecondition("the executable has been deleted");
  auto prepared = PrepareRun(executable_, host_callbacks_, device, arguments, num_arguments, may_donate);
  if (!prepared.ok()) return prepared.status();
  StatusOr<std::pair<std::shared_ptr<sim::CollectiveSession>, int>> replica = ReplicaSession(device);
  if (!replica.ok()) return replica.status();
  prepared->run.collectives = std::move(replica->first);
  prepared->run.rank = replica->second;
  TakeOver(prepared->donated);
  Submit(std::move(prepared->run));
  return std::move(prepared->execution);
}

StatusOr<std::vector<LoadedExecutable::Execution>> LoadedExecutable::ExecuteOnAllCores(
    PJRT_Buffer* const* const* argument_lists, size_t num_arguments,
    const std::function<bool(size_t)>& may_donate) const {
  if (is_deleted()) return FailedPrecondition("the executable has been deleted");
  StatusOr<sim::Interconnect> net = InterconnectOf(devices_, executable_.program().target());
  if (!net.ok()) return net.status();
  auto session = std::make_shared<sim::CollectiveSession>(std::move(*net), executable_.program().target());
  std::vector<QueuedExecution> runs;
  std::vector<Execution> executions;
  std::vector<Buffer*> donated;
  for (size_t r = 0; r < devices_.size(); ++r) {
    auto prepared = PrepareRun(executable_, host_callbacks_, devices_[r], argument_lists[r], num_arguments, may_donate);
    if (!prepared.ok()) {
      return Status(prepared.status().code(), devices_[r]->name() + " (core " + std::to_string(r) +
                                                  "): " + prepared.status().message());
    }
    prepared->run.collectives = session;
    prepared->run.rank = static_cast<int>(r);
    runs.push_back(std::move(prepared->run));
    executions.push_back(std::move(prepared->execution));
    donated.insert(donated.end(), prepared->donated.begin(), prepared->donated.end());
  }
  TakeOver(donated);
  // Queued under one lock: two multi-core executions sharing devices reach every device's queue
  // in the same order, so neither waits at a collective for a core busy with the other.
  static std::mutex submission;
  std::lock_guard<std::mutex> lock(submission);
  for (QueuedExecution& run : runs) Submit(std::move(run));
  return executions;
}

}  // namespace trn::pjrt
