// PJRT_Buffer: an array in one memory space of one device, held as dense row-major host bytes
// (an Allocation counted against the memory's capacity). Its bytes are defined when its ready
// completion completes (an execution's output: when the execution ends; with its error if it
// failed, which every read then reports). Reads wait for it. Deleting a buffer frees its bytes
// at once unless an execution still reads or writes them; the handle stays valid until destroyed.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "event.h"
#include "memory.h"
#include "pjrt_c_api.h"
#include "sim/dtype.h"
#include "sim/status.h"

struct PJRT_Buffer {};

namespace trn::pjrt {

class Device;

class Buffer : public PJRT_Buffer {
 public:
  // `ready`: completes when the bytes are defined (default: they already are).
  Buffer(sim::DType dtype, std::vector<int64_t> dims, std::shared_ptr<Allocation> allocation,
         std::shared_ptr<Completion> ready = Completion::Done());
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // `handle` as a trn Buffer, or NULL when this plugin did not create it (a buffer of another
  // PJRT client) or has destroyed it.
  static const Buffer* FromHandle(const PJRT_Buffer* handle);
  static Buffer* FromHandle(PJRT_Buffer* handle) {
    return const_cast<Buffer*>(FromHandle(static_cast<const PJRT_Buffer*>(handle)));
  }

  // A new buffer in `memory`, copied from host bytes laid out with `byte_strides`.
  static StatusOr<std::unique_ptr<Buffer>> FromHost(const void* data, sim::DType dtype,
                                                    std::vector<int64_t> dims,
                                                    const std::vector<int64_t>& byte_strides,
                                                    Memory* memory);

  Memory* memory() const { return memory_; }
  Device* device() const { return memory_->device(); }
  sim::DType dtype() const { return dtype_; }
  PJRT_Buffer_Type element_type() const { return static_cast<PJRT_Buffer_Type>(dtype_); }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t byte_size() const { return byte_size_; }
  const std::shared_ptr<Completion>& ready() const { return ready_; }

  // The bytes, kept alive for as long as the caller holds them; FAILED_PRECONDITION once the
  // buffer is deleted.
  StatusOr<std::shared_ptr<Allocation>> allocation() const;
  void Delete();
  bool is_deleted() const;

  // Bytes a host copy in `host_layout` (NULL: dense) spans.
  StatusOr<int64_t> HostByteSize(const PJRT_Buffer_MemoryLayout* host_layout) const;
  // The copies below check their arguments now and copy once the buffer is ready (now, if it
  // is); the completion they return completes after the copy, or with the buffer's error. `dst`
  // must stay valid until then.
  // Copies the array to `dst` (at least `dst_size` bytes) in `host_layout` (NULL: dense).
  StatusOr<std::shared_ptr<Completion>> ToHost(void* dst, size_t dst_size,
                                               const PJRT_Buffer_MemoryLayout* host_layout) const;
  // Copies `size` raw bytes starting at `offset` of the dense device representation.
  StatusOr<std::shared_ptr<Completion>> CopyRawToHost(void* dst, int64_t offset,
                                                      int64_t size) const;
  // A new buffer in `memory`, ready once the copy is made.
  StatusOr<std::unique_ptr<Buffer>> CopyTo(Memory* memory) const;

  // Whether an execution may take the bytes over (donation): not deleted, and no external
  // reference (a DLPack view, an unsafe pointer) could still see them.
  bool donatable() const;

  void IncreaseExternalReferenceCount();
  Status DecreaseExternalReferenceCount();

 private:
  Memory* const memory_;  // not owned; owned by the client's device
  const sim::DType dtype_;
  const std::vector<int64_t> dims_;
  const int64_t byte_size_;
  const std::shared_ptr<Completion> ready_;

  // The bytes, shared with the callback that frees them when the buffer's producer fails (its
  // bytes then mean nothing, and an abandoned failed output must not hold HBM).
  struct Storage {
    std::mutex mu;
    std::shared_ptr<Allocation> allocation;  // guarded by mu; NULL once deleted or failed
    bool deleted = false;                    // guarded by mu
  };
  const std::shared_ptr<Storage> storage_;

  mutable std::mutex mu_;
  int64_t external_references_ = 0;  // guarded by mu_
};

}  // namespace trn::pjrt
