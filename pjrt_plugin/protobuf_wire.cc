#include "protobuf_wire.h"

namespace trn::pjrt {
namespace {

bool ReadVarint(std::string_view data, size_t& pos, uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (pos >= data.size()) return false;
    uint8_t byte = static_cast<uint8_t>(data[pos++]);
    value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

void AppendVarint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

Status Malformed(std::string_view what, size_t pos) {
  return DataLoss("malformed " + std::string(what) + " at byte " + std::to_string(pos));
}

}  // namespace

Status ForEachWireField(std::string_view message, std::string_view what,
                        const std::function<Status(const WireField&)>& visit) {
  size_t pos = 0;
  while (pos < message.size()) {
    const size_t start = pos;
    uint64_t key;
    if (!ReadVarint(message, pos, key)) return Malformed(what, start);
    WireField field;
    field.number = static_cast<int>(key >> 3);
    field.wire_type = static_cast<int>(key & 7);
    switch (field.wire_type) {
      case 0:
        if (!ReadVarint(message, pos, field.varint)) return Malformed(what, start);
        break;
      case 1:
      case 5: {
        const size_t width = field.wire_type == 1 ? 8 : 4;
        if (message.size() - pos < width) return Malformed(what, start);
        for (size_t i = 0; i < width; ++i) {
          field.varint |= static_cast<uint64_t>(static_cast<uint8_t>(message[pos + i])) << (8 * i);
        }
        pos += width;
        break;
      }
      case 2: {
        uint64_t length;
        if (!ReadVarint(message, pos, length) || length > message.size() - pos) {
          return Malformed(what, start);
        }
        field.bytes = message.substr(pos, length);
        pos += length;
        break;
      }
      default:
        return Malformed(what, start);
    }
    TRN_RETURN_IF_ERROR(visit(field));
  }
  return Status::Ok();
}

Status ForEachPackedVarint(std::string_view bytes, std::string_view what,
                           const std::function<void(uint64_t)>& visit) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    const size_t start = pos;
    uint64_t value;
    if (!ReadVarint(bytes, pos, value)) return Malformed(what, start);
    visit(value);
  }
  return Status::Ok();
}

void AppendVarintField(std::string& out, int number, uint64_t value) {
  AppendVarint(out, static_cast<uint64_t>(number) << 3);
  AppendVarint(out, value);
}

void AppendBytesField(std::string& out, int number, std::string_view bytes) {
  AppendVarint(out, (static_cast<uint64_t>(number) << 3) | 2);
  AppendVarint(out, bytes.size());
  out.append(bytes);
}

}  // namespace trn::pjrt
