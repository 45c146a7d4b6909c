// The fields of a serialized xla.CompileOptionsProto that the plugin and the compiler act on: the
// one parser of the proto (the compiler receives these values through compiler_bridge.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "sim/status.h"

namespace trn::pjrt {

struct CompileOptions {
  // executable_build_options.device_assignment, flattened replica-major; empty when absent.
  std::vector<int64_t> assigned_devices;
  // executable_build_options.num_replicas / num_partitions, 0 when absent. The compiler checks
  // them (it refuses programs both replicated and partitioned).
  int64_t num_replicas = 0;
  int64_t num_partitions = 0;
  // env_option_overrides (JAX's `compiler_options=`): XLA option names and their values, which
  // the compiler checks with XLA's own option parser (hlo_lowering/option_overrides.py).
  std::vector<std::pair<std::string, std::variant<std::string, bool, int64_t, double>>>
      option_overrides;
};

StatusOr<CompileOptions> ParseCompileOptions(std::string_view serialized);

// A serialized xla.DeviceAssignmentProto for one replica and one computation on `device_id`.
std::string SingleDeviceAssignmentProto(int device_id);

// The same for one replica of `device_ids.size()` partitions (computation i on device_ids[i]).
std::string PartitionedDeviceAssignmentProto(const std::vector<int>& device_ids);

}  // namespace trn::pjrt
