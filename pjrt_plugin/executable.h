// PJRT_Executable: a compiled NeuronCore program and what clients ask about it (outputs, sizes,
// fingerprint, the source it came from), independent of the device it is loaded on.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "layouts_extension.h"
#include "pjrt_c_api.h"
#include "sim/runtime.h"

struct PJRT_Executable {};

namespace trn::pjrt {

struct CompiledMemoryStats {
  int64_t generated_code_bytes = 0;  // the serialized program, constants included
  int64_t argument_bytes = 0;
  int64_t output_bytes = 0;
  int64_t temp_bytes = 0;
  int64_t peak_bytes = 0;  // arguments + outputs + temporaries + constants
};

class Executable : public PJRT_Executable {
 public:
  // `num_partitions`: the cores one execution runs on (docs/multi-device.md).
  explicit Executable(std::shared_ptr<const sim::LoadedProgram> program, int num_partitions = 1);
  Executable(const Executable&) = delete;  // output_layouts_ points into output_layout_values_
  Executable& operator=(const Executable&) = delete;

  int num_partitions() const { return num_partitions_; }

  const sim::LoadedProgram& program() const { return *program_; }
  const std::shared_ptr<const sim::LoadedProgram>& shared_program() const { return program_; }
  const std::string& name() const { return name_; }
  const std::string& fingerprint() const { return fingerprint_; }

  size_t num_outputs() const { return output_types_.size(); }
  const std::vector<PJRT_Buffer_Type>& output_types() const { return output_types_; }
  const std::vector<int64_t>& output_dims() const { return output_dims_; }  // concatenated
  const std::vector<size_t>& output_ranks() const { return output_ranks_; }
  const std::vector<const char*>& output_memory_kinds() const { return output_memory_kinds_; }
  const std::vector<size_t>& output_memory_kind_sizes() const { return output_kind_sizes_; }
  // One per output, for the layouts extension.
  const std::vector<PJRT_Layouts_MemoryLayout*>& output_layouts() const { return output_layouts_; }
  CompiledMemoryStats memory_stats() const;
  // The program's static cost (flops, transcendentals, bytes accessed: hlo_lowering/
  // cost_analysis.py), computed from its source on the first request and owned by the
  // executable. UNIMPLEMENTED for a partitioned program, whose source is only its signature,
  // and for a program built without StableHLO source.
  StatusOr<const std::vector<PJRT_NamedValue>*> cost_analysis() const;

 private:
  struct CostProperties {
    std::vector<std::string> names;
    std::vector<PJRT_NamedValue> values;  // point into `names`
  };
  std::shared_ptr<const sim::LoadedProgram> program_;  // shared with loaded executables
  int num_partitions_;
  std::string name_;         // the module's name in its source, else "trn_program"
  std::string fingerprint_;  // hex of a 64-bit FNV-1a hash of the program bytes
  std::vector<PJRT_Buffer_Type> output_types_;
  std::vector<int64_t> output_dims_;
  std::vector<size_t> output_ranks_;
  std::vector<const char*> output_memory_kinds_;  // "device" for every output
  std::vector<size_t> output_kind_sizes_;
  std::vector<PJRT_Layouts_MemoryLayout> output_layout_values_;
  std::vector<PJRT_Layouts_MemoryLayout*> output_layouts_;
  mutable std::mutex cost_mutex_;
  mutable std::unique_ptr<const CostProperties> cost_;  // set once, under cost_mutex_
};

}  // namespace trn::pjrt
