#include "memory.h"

#include <new>
#include <utility>

#include "device.h"

namespace trn::pjrt {

MemoryAccount::MemoryAccount(int64_t capacity) : capacity(capacity) {
  stats.has_limit = capacity >= 0;
  stats.bytes_limit = capacity >= 0 ? capacity : 0;
}

void MemoryAccount::Release(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu);
  stats.bytes_in_use -= bytes;
}

Reservation& Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    if (account_ != nullptr) account_->Release(bytes_);
    account_ = std::move(other.account_);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

Reservation::~Reservation() {
  if (account_ != nullptr) account_->Release(bytes_);
}

Memory::Memory(int id, MemoryKind kind, Device* device, int64_t capacity)
    : id_(id), kind_(kind), device_(device),
      account_(std::make_shared<MemoryAccount>(capacity)) {
  const std::string& dev = device->name();
  kind_name_ = kind == MemoryKind::kDevice ? "device" : "pinned_host";
  label_ = dev + (kind == MemoryKind::kDevice ? " (HBM)" : " (pinned host)");
  debug_string_ = label_;
  to_string_ = "MEMORY_SPACE_" + std::to_string(id) + "(" + kind_name_ + ", " + dev + ")";
  addressable_by_.push_back(device);
}

StatusOr<Reservation> Memory::Reserve(int64_t bytes) {
  MemoryAccount& account = *account_;
  std::lock_guard<std::mutex> lock(account.mu);
  MemoryStats& stats = account.stats;
  if (account.capacity >= 0 && bytes > account.capacity - stats.bytes_in_use) {
    return ResourceExhausted("trn: cannot allocate " + std::to_string(bytes) + " bytes on " +
                             label_ + ": " + std::to_string(stats.bytes_in_use) + " of " +
                             std::to_string(account.capacity) + " bytes in use");
  }
  stats.bytes_in_use += bytes;
  stats.num_allocs += 1;
  if (stats.bytes_in_use > stats.peak_bytes_in_use) stats.peak_bytes_in_use = stats.bytes_in_use;
  if (bytes > stats.largest_alloc_size) stats.largest_alloc_size = bytes;
  return Reservation(account_, bytes);
}

MemoryStats Memory::stats() const {
  std::lock_guard<std::mutex> lock(account_->mu);
  return account_->stats;
}

StatusOr<std::shared_ptr<Allocation>> Allocation::Create(Memory* memory, int64_t size) {
  StatusOr<Reservation> reservation = memory->Reserve(size);
  if (!reservation.ok()) return reservation.status();
  // Default-initialised (not zero-filled): buffers are written in full before anyone reads them,
  // and touching every page of a multi-GiB array twice is a visible cost.
  std::unique_ptr<uint8_t[]> data(new (std::nothrow) uint8_t[size > 0 ? size : 1]);
  if (data == nullptr) {
    return ResourceExhausted("trn: the host is out of memory for the " + std::to_string(size) +
                             "-byte storage standing for " + memory->debug_string());
  }
  return std::shared_ptr<Allocation>(
      new Allocation(memory, size, std::move(*reservation), std::move(data)));
}

}  // namespace trn::pjrt
