// The fields of a serialized xla.CompileOptionsProto this plugin acts on. The compiler (Python)
// reads the rest; the plugin needs only which device the executable is bound to.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/status.h"

namespace trn::pjrt {

// Replica and partition counts are the compiler's to check (it refuses more than one of each).
struct CompileOptions {
  // executable_build_options.device_assignment, flattened replica-major; empty when absent.
  std::vector<int64_t> assigned_devices;
};

StatusOr<CompileOptions> ParseCompileOptions(std::string_view serialized);

// A serialized xla.DeviceAssignmentProto for one replica and one computation on `device_id`.
std::string SingleDeviceAssignmentProto(int device_id);

}  // namespace trn::pjrt
