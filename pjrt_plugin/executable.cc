#include "executable.h"

#include <cctype>
#include <cstdio>

#include "compiler_bridge.h"

namespace trn::pjrt {
namespace {

constexpr char kDeviceMemoryKind[] = "device";

std::string Fnv1aHex(const std::vector<uint8_t>& bytes) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (uint8_t b : bytes) {
    hash ^= b;
    hash *= 0x100000001b3ull;
  }
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

// "module @jit_f attributes {...}" -> "jit_f"
std::string ModuleName(const std::string& source) {
  const std::string marker = "module @";
  size_t start = source.find(marker);
  if (start == std::string::npos) return "trn_program";
  start += marker.size();
  size_t end = start;
  while (end < source.size() && (std::isalnum(static_cast<unsigned char>(source[end])) ||
                                 source[end] == '_' || source[end] == '.' || source[end] == '$')) {
    ++end;
  }
  return end > start ? source.substr(start, end - start) : "trn_program";
}

}  // namespace

Executable::Executable(std::shared_ptr<const sim::LoadedProgram> program, int num_partitions)
    : program_(std::move(program)),
      num_partitions_(num_partitions),
      name_(ModuleName(program_->source())),
      fingerprint_(Fnv1aHex(program_->bytes())) {
  for (const sim::TensorInfo& output : program_->outputs()) {
    output_types_.push_back(static_cast<PJRT_Buffer_Type>(output.dtype));
    output_dims_.insert(output_dims_.end(), output.shape.begin(), output.shape.end());
    output_ranks_.push_back(output.shape.size());
    output_memory_kinds_.push_back(kDeviceMemoryKind);
    output_kind_sizes_.push_back(sizeof(kDeviceMemoryKind) - 1);
    output_layout_values_.push_back(RowMajorLayout(output.shape.size()));
  }
  for (PJRT_Layouts_MemoryLayout& layout : output_layout_values_) output_layouts_.push_back(&layout);
}

CompiledMemoryStats Executable::memory_stats() const {
  CompiledMemoryStats stats;
  stats.generated_code_bytes = static_cast<int64_t>(program_->bytes().size());
  for (const sim::TensorInfo& p : program_->parameters()) stats.argument_bytes += p.byte_size;
  for (const sim::TensorInfo& o : program_->outputs()) stats.output_bytes += o.byte_size;
  stats.temp_bytes = program_->temporary_bytes();
  stats.peak_bytes = stats.argument_bytes + stats.output_bytes + stats.temp_bytes +
                     program_->constant_bytes();
  return stats;
}

StatusOr<const std::vector<PJRT_NamedValue>*> Executable::cost_analysis() const {
  {
    std::lock_guard<std::mutex> lock(cost_mutex_);
    if (cost_ != nullptr) return &cost_->values;
  }
  if (num_partitions_ > 1) {
    return Unimplemented("cost analysis of a program partitioned over " +
                         std::to_string(num_partitions_) +
                         " cores is not available: its stored source is only the signature");
  }
  if (program_->source().empty()) {
    return Unimplemented("cost analysis needs the program's StableHLO source, and this program "
                         "carries none (it was not built from StableHLO)");
  }
  // Computed without the lock: the compiler takes the GIL, which a waiting caller may hold.
  StatusOr<std::vector<std::pair<std::string, double>>> computed =
      CostAnalysisInPython(program_->source());
  if (!computed.ok()) return computed.status();
  auto cost = std::make_unique<CostProperties>();
  for (auto& [name, value] : *computed) cost->names.push_back(std::move(name));
  for (size_t i = 0; i < cost->names.size(); ++i) {
    PJRT_NamedValue v{};
    v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
    v.name = cost->names[i].c_str();
    v.name_size = cost->names[i].size();
    v.type = PJRT_NamedValue_kFloat;
    v.float_value = static_cast<float>((*computed)[i].second);
    v.value_size = 1;
    cost->values.push_back(v);
  }
  std::lock_guard<std::mutex> lock(cost_mutex_);
  if (cost_ == nullptr) cost_ = std::move(cost);  // a concurrent first request may have won
  return &cost_->values;
}

}  // namespace trn::pjrt
