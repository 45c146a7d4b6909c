// PJRT_Memory: a memory space of one device. "device" is the NeuronCore's simulated HBM, with a
// capacity every allocation is checked against; "pinned_host" is host memory the device can DMA
// from, uncapped. Both hold their bytes in host storage; the accounting is what makes HBM real.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pjrt_c_api.h"
#include "sim/status.h"

// Clients built against PJRT headers >= ~0.105 read a leading vtable pointer from PJRT_Memory
// (shared/design/pjrt-contract.md); it must exist and be NULL.
struct PJRT_Memory {
  void* vtable = nullptr;
};

namespace trn::pjrt {

class Device;

enum class MemoryKind { kDevice = 0, kPinnedHost = 1 };

struct MemoryStats {
  int64_t bytes_in_use = 0;
  int64_t peak_bytes_in_use = 0;
  int64_t num_allocs = 0;
  int64_t largest_alloc_size = 0;
  int64_t bytes_limit = 0;  // 0 with has_limit false: uncapped
  bool has_limit = false;
};

// The byte count of one memory. Shared by the memory and every reservation against it, so a
// buffer destroyed after its client (a client bug, but one Python garbage collection makes easy)
// still releases its bytes safely.
struct MemoryAccount {
  explicit MemoryAccount(int64_t capacity);
  void Release(int64_t bytes);

  const int64_t capacity;  // < 0: uncapped
  std::mutex mu;
  MemoryStats stats;  // guarded by mu
};

// Bytes counted against a memory until the reservation is destroyed. Move-only.
class Reservation {
 public:
  Reservation() = default;
  Reservation(std::shared_ptr<MemoryAccount> account, int64_t bytes)
      : account_(std::move(account)), bytes_(bytes) {}
  Reservation(Reservation&& other) noexcept = default;
  Reservation& operator=(Reservation&& other) noexcept;
  Reservation(const Reservation&) = delete;
  Reservation& operator=(const Reservation&) = delete;
  ~Reservation();

 private:
  std::shared_ptr<MemoryAccount> account_;  // NULL once moved from
  int64_t bytes_ = 0;
};

class Memory : public PJRT_Memory {
 public:
  // `capacity` < 0: uncapped.
  Memory(int id, MemoryKind kind, Device* device, int64_t capacity);

  int id() const { return id_; }
  MemoryKind kind() const { return kind_; }
  int kind_id() const { return static_cast<int>(kind_); }
  const std::string& kind_name() const { return kind_name_; }
  Device* device() const { return device_; }
  const std::string& debug_string() const { return debug_string_; }
  const std::string& to_string() const { return to_string_; }
  const std::vector<PJRT_Device*>& addressable_by() const { return addressable_by_; }

  // RESOURCE_EXHAUSTED when `bytes` do not fit beside what is in use.
  StatusOr<Reservation> Reserve(int64_t bytes);
  MemoryStats stats() const;

 private:
  const int id_;
  const MemoryKind kind_;
  Device* const device_;  // not owned; the device owns this memory
  std::string kind_name_, label_, debug_string_, to_string_;
  std::vector<PJRT_Device*> addressable_by_;  // {device_}
  std::shared_ptr<MemoryAccount> account_;    // created with the memory
};

// Host storage standing for `size` bytes of a memory, reserved against its capacity for as long
// as the allocation lives. Shared between a buffer and executions reading it.
class Allocation {
 public:
  static StatusOr<std::shared_ptr<Allocation>> Create(Memory* memory, int64_t size);

  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  int64_t size() const { return size_; }
  Memory* memory() const { return memory_; }

 private:
  Allocation(Memory* memory, int64_t size, Reservation reservation,
             std::unique_ptr<uint8_t[]> data)
      : memory_(memory), size_(size), reservation_(std::move(reservation)),
        data_(std::move(data)) {}

  Memory* memory_;
  int64_t size_;
  Reservation reservation_;
  std::unique_ptr<uint8_t[]> data_;  // never NULL, even for size 0; not zero-filled
};

}  // namespace trn::pjrt
