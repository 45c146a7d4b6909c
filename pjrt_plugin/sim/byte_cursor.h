// A bounds-checked little-endian reader with a sticky error, for the program loader.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "status.h"

namespace trn::sim::loader {

// Reads little-endian fields with a sticky error: after the first failure every read returns
// zero, so parsing code stays linear and the first problem is the one reported.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  size_t offset() const { return offset_; }
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  void Fail(size_t at, const std::string& message) {
    if (!status_.ok()) return;
    status_ = InvalidArgument("malformed program at byte " + std::to_string(at) + context_ +
                              ": " + message);
  }
  void Fail(const std::string& message) { Fail(offset_, message); }
  void SetContext(std::string context) { context_ = std::move(context); }

  template <typename T>
  T Read(const char* what) {
    T value{};
    if (!ok()) return value;
    if (size_ - offset_ < sizeof(T)) {
      Fail("truncated: expected " + std::string(what) + " (" + std::to_string(sizeof(T)) +
           " bytes), " + std::to_string(size_ - offset_) + " left");
      return value;
    }
    std::memcpy(&value, data_ + offset_, sizeof(T));
    offset_ += sizeof(T);
    return value;
  }

  // A list count, checked against the bytes left (each element takes at least `min_bytes`).
  uint32_t Count(const char* what, size_t min_bytes) {
    const size_t at = offset_;
    const uint32_t n = Read<uint32_t>(what);
    if (ok() && n * static_cast<uint64_t>(min_bytes) > size_ - offset_) {
      Fail(at, std::string(what) + " " + std::to_string(n) + " needs at least " +
                   std::to_string(n * static_cast<uint64_t>(min_bytes)) + " bytes, " +
                   std::to_string(size_ - offset_) + " left");
      return 0;
    }
    return ok() ? n : 0;
  }

  std::string String(const char* what) {
    const uint32_t n = Count(what, 1);
    if (!ok()) return {};
    std::string s(reinterpret_cast<const char*>(data_ + offset_), n);
    offset_ += n;
    return s;
  }

  std::vector<uint8_t> Blob(const char* what) {
    const size_t at = offset_;
    const uint64_t n = Read<uint64_t>(what);
    if (!ok()) return {};
    if (n > size_ - offset_) {
      Fail(at, std::string(what) + " of " + std::to_string(n) + " bytes, " +
                   std::to_string(size_ - offset_) + " left");
      return {};
    }
    std::vector<uint8_t> blob(data_ + offset_, data_ + offset_ + n);
    offset_ += n;
    return blob;
  }

  bool AtEnd() const { return offset_ == size_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t offset_ = 0;
  Status status_;
  std::string context_;
};

}  // namespace trn::sim::loader
