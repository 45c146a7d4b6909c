#include "compile_options.h"

#include <cstring>

#include "protobuf_wire.h"

namespace trn::pjrt {
namespace {

// Field numbers from xla/pjrt/proto/compile_options.proto and xla/xla_data.proto.
constexpr int kCompileOptionsExecutableBuildOptions = 3;
constexpr int kCompileOptionsEnvOptionOverrides = 7;  // map<string, OptionOverrideProto>
constexpr int kMapKey = 1;
constexpr int kMapValue = 2;
constexpr int kOverrideString = 1;
constexpr int kOverrideBool = 2;
constexpr int kOverrideInt = 3;
constexpr int kOverrideDouble = 4;
constexpr int kBuildOptionsNumReplicas = 4;
constexpr int kBuildOptionsNumPartitions = 5;
constexpr int kBuildOptionsDeviceAssignment = 9;
constexpr int kDeviceAssignmentReplicaCount = 1;
constexpr int kDeviceAssignmentComputationCount = 2;
constexpr int kDeviceAssignmentComputationDevices = 3;
constexpr int kComputationDeviceReplicaDeviceIds = 1;

Status ReadDeviceAssignment(std::string_view bytes, CompileOptions& options) {
  return ForEachWireField(bytes, "DeviceAssignmentProto", [&](const WireField& f) -> Status {
    if (f.number != kDeviceAssignmentComputationDevices || f.wire_type != 2) return Status::Ok();
    return ForEachWireField(f.bytes, "DeviceAssignmentProto.ComputationDevice",
                            [&](const WireField& d) -> Status {
      if (d.number != kComputationDeviceReplicaDeviceIds) return Status::Ok();
      if (d.wire_type == 0) {
        options.assigned_devices.push_back(static_cast<int64_t>(d.varint));
        return Status::Ok();
      }
      return ForEachPackedVarint(d.bytes, "replica_device_ids", [&](uint64_t id) {
        options.assigned_devices.push_back(static_cast<int64_t>(id));
      });
    });
  });
}

Status ReadBuildOptions(std::string_view bytes, CompileOptions& options) {
  return ForEachWireField(bytes, "ExecutableBuildOptionsProto", [&](const WireField& f) -> Status {
    if (f.number == kBuildOptionsDeviceAssignment && f.wire_type == 2) {
      return ReadDeviceAssignment(f.bytes, options);
    }
    if (f.number == kBuildOptionsNumReplicas && f.wire_type == 0) {
      options.num_replicas = static_cast<int64_t>(f.varint);
    } else if (f.number == kBuildOptionsNumPartitions && f.wire_type == 0) {
      options.num_partitions = static_cast<int64_t>(f.varint);
    }
    return Status::Ok();
  });
}

Status ReadOptionOverride(std::string_view entry, CompileOptions& options) {
  std::string key;
  std::variant<std::string, bool, int64_t, double> value;
  Status status = ForEachWireField(entry, "env_option_overrides entry", [&](const WireField& f) {
    if (f.number == kMapKey && f.wire_type == 2) key = std::string(f.bytes);
    if (f.number != kMapValue || f.wire_type != 2) return Status::Ok();
    return ForEachWireField(f.bytes, "OptionOverrideProto", [&](const WireField& v) {
      if (v.number == kOverrideString && v.wire_type == 2) value = std::string(v.bytes);
      if (v.number == kOverrideBool && v.wire_type == 0) value = v.varint != 0;
      if (v.number == kOverrideInt && v.wire_type == 0) value = static_cast<int64_t>(v.varint);
      if (v.number == kOverrideDouble && v.wire_type == 1) {
        double d;
        std::memcpy(&d, &v.varint, sizeof d);
        value = d;
      }
      return Status::Ok();
    });
  });
  if (!status.ok()) return status;
  options.option_overrides.emplace_back(std::move(key), std::move(value));
  return Status::Ok();
}

}  // namespace

StatusOr<CompileOptions> ParseCompileOptions(std::string_view serialized) {
  CompileOptions options;
  Status status = ForEachWireField(serialized, "CompileOptionsProto", [&](const WireField& f) {
    if (f.number == kCompileOptionsExecutableBuildOptions && f.wire_type == 2) {
      return ReadBuildOptions(f.bytes, options);
    }
    if (f.number == kCompileOptionsEnvOptionOverrides && f.wire_type == 2) {
      return ReadOptionOverride(f.bytes, options);
    }
    return Status::Ok();
  });
  if (!status.ok()) return InvalidArgument("compile options: " + status.message());
  return options;
}

std::string SingleDeviceAssignmentProto(int device_id) {
  return PartitionedDeviceAssignmentProto({device_id});
}

std::string PartitionedDeviceAssignmentProto(const std::vector<int>& device_ids) {
  std::string proto;
  AppendVarintField(proto, kDeviceAssignmentReplicaCount, 1);
  AppendVarintField(proto, kDeviceAssignmentComputationCount, device_ids.size());
  for (int id : device_ids) {
    std::string ids;
    AppendVarintField(ids, kComputationDeviceReplicaDeviceIds, static_cast<uint64_t>(id));
    AppendBytesField(proto, kDeviceAssignmentComputationDevices, ids);
  }
  return proto;
}

}  // namespace trn::pjrt
