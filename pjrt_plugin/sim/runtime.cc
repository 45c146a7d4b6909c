// LoadedProgram and Execute (runtime.h): binding caller buffers to the HBM tensor table and
// leasing temporaries.
#include "runtime.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "executor.h"
#include "machine.h"
#include "program.h"
#include "program_loader.h"
#include "temporary_pool.h"

namespace trn::sim {
namespace {

TensorInfo InfoOf(const Tensor& t) {
  if (t.complex_pairs) {  // bound to the caller's c64 [d...] buffer
    return {t.name, DType::kC64, {t.shape.begin(), t.shape.end() - 1}, t.byte_size};
  }
  if (t.nibbles) return {t.name, t.dtype == DType::kS8 ? DType::kS4 : DType::kU4, t.shape, t.byte_size};
  return {t.name, t.dtype, t.shape, t.byte_size};
}

}  // namespace

StatusOr<std::shared_ptr<const LoadedProgram>> LoadedProgram::Load(const void* bytes, size_t size) {
  auto parsed = ParseProgram(static_cast<const uint8_t*>(bytes), size);
  if (!parsed.ok()) return parsed.status();
  std::shared_ptr<LoadedProgram> loaded(new LoadedProgram());
  loaded->program_ = std::move(parsed.value());
  const auto* begin = static_cast<const uint8_t*>(bytes);
  loaded->bytes_.assign(begin, begin + size);
  auto place = [](std::vector<TensorInfo>& list, uint32_t number, TensorInfo info) {
    if (list.size() <= number) list.resize(number + 1);
    list[number] = std::move(info);
  };
  for (const Tensor& t : loaded->program_->tensors) {
    if (t.kind == TensorKind::kParameter) {
      place(loaded->parameters_, t.index, InfoOf(t));
    } else if (t.kind == TensorKind::kOutput) {
      place(loaded->outputs_, t.index, InfoOf(t));
    } else if (t.kind == TensorKind::kDonatedParameter) {
      TensorInfo info = InfoOf(t);
      info.alias = static_cast<int32_t>(t.output);
      place(loaded->parameters_, t.index, info);
      info.alias = static_cast<int32_t>(t.index);
      place(loaded->outputs_, t.output, info);
    }
  }
  std::vector<int64_t> temporary_sizes;
  for (const Tensor& t : loaded->program_->tensors) {
    if (t.kind == TensorKind::kTemporary) temporary_sizes.push_back(t.byte_size);
  }
  loaded->temporaries_ = std::make_unique<TemporaryPool>(std::move(temporary_sizes));
  loaded->source_ = loaded->program_->source;
  return std::shared_ptr<const LoadedProgram>(std::move(loaded));
}

LoadedProgram::~LoadedProgram() = default;

const TargetSpec& LoadedProgram::target() const { return *program_->target; }
const std::vector<TensorInfo>& LoadedProgram::parameters() const { return parameters_; }
const std::vector<TensorInfo>& LoadedProgram::outputs() const { return outputs_; }
const std::string& LoadedProgram::source() const { return source_; }
const std::vector<uint8_t>& LoadedProgram::bytes() const { return bytes_; }

int64_t LoadedProgram::temporary_bytes() const {
  int64_t total = 0;
  for (const Tensor& t : program_->tensors) {
    if (t.kind == TensorKind::kTemporary) total += t.byte_size;
  }
  return total;
}

int64_t LoadedProgram::constant_bytes() const {
  int64_t total = 0;
  for (const Tensor& t : program_->tensors) {
    if (t.kind == TensorKind::kConstant) total += t.byte_size;
  }
  return total;
}

Status Execute(const LoadedProgram& loaded, const std::vector<const void*>& parameters,
               const std::vector<void*>& outputs, const ExecuteOptions& options,
               ExecutionProfile* profile) {
  if (parameters.size() != loaded.parameters().size() || outputs.size() != loaded.outputs().size()) {
    return InvalidArgument("program takes " + std::to_string(loaded.parameters().size()) + " parameters and " +
                           std::to_string(loaded.outputs().size()) + " outputs; got " + std::to_string(parameters.size()) +
                           " and " + std::to_string(outputs.size()));
  }
  const Program& program = loaded.program();
  Machine machine(program);
  machine.collectives = options.collectives.get();
  machine.rank = options.rank;
  if (!machine.ok()) return ResourceExhausted("cannot allocate SBUF/PSUM for the simulated NeuronCore");
  size_t failed = 0;
  const std::unique_ptr<TemporaryPool::Lease> temporaries = loaded.temporaries().Acquire(&failed);
  size_t next_temporary = 0;
  for (size_t i = 0; i < program.tensors.size(); ++i) {
    const Tensor& t = program.tensors[i];
    uint8_t* data = nullptr;
    switch (t.kind) {
      case TensorKind::kParameter:
        // Parameters are never written (the loader rejects such instructions).
        data = static_cast<uint8_t*>(const_cast<void*>(parameters[t.index]));
        break;
      case TensorKind::kOutput:
        data = static_cast<uint8_t*>(outputs[t.index]);
        break;
      case TensorKind::kDonatedParameter:
        // Read and written in place in the output's buffer, which starts with the parameter's
        // bytes: the caller passes the donated buffer as both (nothing to copy) or two buffers.
        data = static_cast<uint8_t*>(outputs[t.output]);
        if (data != nullptr && parameters[t.index] != nullptr && parameters[t.index] != data) {
          std::memcpy(data, parameters[t.index], t.byte_size);
        }
        break;
      case TensorKind::kConstant:
        data = const_cast<uint8_t*>(t.data.data());
        break;
      case TensorKind::kTemporary:
        if (temporaries == nullptr) {
          if (failed == next_temporary++) {
            return ResourceExhausted("cannot allocate " + std::to_string(t.byte_size) +
                                     " bytes for temporary " + t.name);
          }
          continue;  // mapped before the one that failed, and released again
        }
        data = temporaries->buffers()[next_temporary++].data();
        break;
    }
    if (data == nullptr && t.byte_size > 0) {
      return InvalidArgument(std::string(t.kind == TensorKind::kOutput ? "output " : "parameter ") + std::to_string(t.index) +
                             " (" + t.name + ") is bound to a null buffer");
    }
    machine.hbm[i] = {data, t.byte_size};
  }
  ExecutionProfile local;
  ExecutionProfile* out = profile != nullptr ? profile : &local;
  *out = ExecutionProfile();
  return RunStreams(machine, options, out);
}

std::string StreamName(int stream) {
  if (stream >= kNumStreams && stream < kMaxStreams) {
    return StreamName(stream % kNumStreams) + "@" + std::to_string(CoreOfStream(stream));
  }
  switch (stream) {
#define TRN_ENGINE_STREAM(NAME, code) case code: return #NAME;
#include "isa.def"
  }
  if (stream >= kFirstDmaStream && stream < kNumStreams) return "DMA" + std::to_string(stream - kFirstDmaStream);
  return "stream(" + std::to_string(stream) + ")";
}

namespace {
std::atomic<int>& TimelineRequests() {
  static std::atomic<int> requests{0};
  return requests;
}
}  // namespace

void SetRecordTimeline(bool on) {
  if (on) {
    TimelineRequests().fetch_add(1);
  } else {
    int current = TimelineRequests().load();
    while (current > 0 && !TimelineRequests().compare_exchange_weak(current, current - 1)) {
    }
  }
}

bool RecordTimelineRequested() {
  if (TimelineRequests().load() > 0) return true;
  const char* value = std::getenv("TRN_PROFILE");  // read each time: cheap next to an execution
  return value != nullptr && *value != '\0' && std::string(value) != "0";
}

}  // namespace trn::sim
