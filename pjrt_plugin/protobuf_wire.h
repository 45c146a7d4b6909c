// Just enough of the protobuf wire format to read the few CompileOptionsProto fields the plugin
// needs and to write a DeviceAssignmentProto and a profiler XSpace, without a protobuf
// dependency.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "sim/status.h"

namespace trn::pjrt {

struct WireField {
  int number = 0;
  int wire_type = 0;       // 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32
  uint64_t varint = 0;     // wire types 0, 1, 5
  std::string_view bytes;  // wire type 2
};

// Calls `visit` for each top-level field of `message`; DATA_LOSS naming `what` and the byte
// offset for malformed input. Groups (wire types 3 and 4) are malformed here: no message this
// plugin reads uses them.
Status ForEachWireField(std::string_view message, std::string_view what,
                        const std::function<Status(const WireField&)>& visit);

// Reads the varints of a packed repeated field (or of one unpacked element).
Status ForEachPackedVarint(std::string_view bytes, std::string_view what,
                           const std::function<void(uint64_t)>& visit);

void AppendVarintField(std::string& out, int number, uint64_t value);
void AppendBytesField(std::string& out, int number, std::string_view bytes);

}  // namespace trn::pjrt
