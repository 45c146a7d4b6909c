#include "buffer.h"

#include <cstring>
#include <functional>
#include <new>
#include <string>
#include <unordered_set>

#include "device.h"
#include "element_type.h"
#include "host_layout.h"

namespace trn::pjrt {

namespace {

// The addresses of every live Buffer: a handle is looked up here before it is cast, so a
// PJRT_Buffer of another plugin is refused without being dereferenced.
std::mutex& LiveBuffersMutex() {
  static std::mutex mu;
  return mu;
}

std::unordered_set<const PJRT_Buffer*>& LiveBuffers() {
  // Leaked on purpose: buffers still alive at exit are destroyed after static objects.
  static auto* live = new std::unordered_set<const PJRT_Buffer*>;
  return *live;
}

}  // namespace

Buffer::Buffer(sim::DType dtype, std::vector<int64_t> dims, std::shared_ptr<Allocation> allocation,
               std::shared_ptr<Completion> ready)
    : memory_(allocation->memory()),
      dtype_(dtype),
      dims_(std::move(dims)),
      byte_size_(allocation->size()),
      ready_(std::move(ready)),
      storage_(std::make_shared<Storage>()) {
  storage_->allocation = std::move(allocation);
  ready_->OnReady([storage = storage_](const Status& status) {
    if (status.ok()) return;
    std::shared_ptr<Allocation> released;
    std::lock_guard<std::mutex> lock(storage->mu);
    released.swap(storage->allocation);
  });
  std::lock_guard<std::mutex> lock(LiveBuffersMutex());
  LiveBuffers().insert(this);
}

Buffer::~Buffer() {
  std::lock_guard<std::mutex> lock(LiveBuffersMutex());
  LiveBuffers().erase(this);
}

const Buffer* Buffer::FromHandle(const PJRT_Buffer* handle) {
  std::lock_guard<std::mutex> lock(LiveBuffersMutex());
  return LiveBuffers().count(handle) ? static_cast<const Buffer*>(handle) : nullptr;
}

StatusOr<std::unique_ptr<Buffer>> Buffer::FromHost(const void* data, sim::DType dtype,
                                                   std::vector<int64_t> dims,
                                                   const std::vector<int64_t>& byte_strides,
                                                   Memory* memory) {
  StatusOr<int64_t> size = DenseByteSize(dtype, dims);
  if (!size.ok()) return size.status();
  if (data == nullptr && *size > 0) return InvalidArgument("host data is NULL");
  StatusOr<std::shared_ptr<Allocation>> allocation = Allocation::Create(memory, *size);
  if (!allocation.ok()) return allocation.status();
  const int64_t element_size = ElementSize(dtype);
  CopyStrided(static_cast<const uint8_t*>(data), byte_strides, (*allocation)->data(),
              DenseByteStrides(dims, element_size), dims, element_size);
  return std::make_unique<Buffer>(dtype, std::move(dims), std::move(*allocation));
}

StatusOr<std::shared_ptr<Allocation>> Buffer::allocation() const {
  std::lock_guard<std::mutex> lock(storage_->mu);
  if (storage_->allocation == nullptr && !storage_->deleted) return ready_->Await();  // failed
  if (storage_->allocation == nullptr) {
    return FailedPrecondition("the " +
                              ShapeString(element_type(), dims_) + " buffer on " +
                              memory_->debug_string() + " has been deleted or donated");
  }
  return storage_->allocation;
}

void Buffer::Delete() {
  std::shared_ptr<Allocation> released;
  {
    std::lock_guard<std::mutex> lock(storage_->mu);
    released.swap(storage_->allocation);
    storage_->deleted = true;
  }
}

bool Buffer::is_deleted() const {
  std::lock_guard<std::mutex> lock(storage_->mu);
  return storage_->deleted;
}

namespace {

StatusOr<std::vector<int64_t>> NonNegativeStrides(const PJRT_Buffer_MemoryLayout* layout,
                                                  const std::vector<int64_t>& dims,
                                                  int64_t element_size) {
  StatusOr<std::vector<int64_t>> strides = HostByteStrides(layout, dims, element_size);
  if (!strides.ok()) return strides;
  for (int64_t s : *strides) {
    if (s < 0) return InvalidArgument("host layout has a negative byte stride");
  }
  return strides;
}

// Runs `copy` once `ready` completes (at once if it has) and returns the completion of the copy:
// `ready`'s error if it failed. The caller's lambda holds what it copies (allocations, strides).
std::shared_ptr<Completion> CopyWhenReady(const std::shared_ptr<Completion>& ready,
                                          std::function<void()> copy) {
  if (ready->is_ready() && ready->Await().ok()) {
    copy();
    return Completion::Done();
  }
  auto copied = Completion::Pending();
  // Runs on the thread that completes `ready` (a device's worker): nothing may escape.
  ready->OnReady([copied, copy = std::move(copy)](const Status& status) {
    if (!status.ok()) return copied->Complete(status);
    try {
      copy();
    } catch (const std::bad_alloc&) {
      return copied->Complete(ResourceExhausted("the host ran out of memory copying a buffer"));
    } catch (...) {
      return copied->Complete(Internal("copying a buffer failed"));
    }
    copied->Complete(Status::Ok());
  });
  return copied;
}

}  // namespace

StatusOr<int64_t> Buffer::HostByteSize(const PJRT_Buffer_MemoryLayout* host_layout) const {
  const int64_t element_size = ElementSize(dtype_);
  StatusOr<std::vector<int64_t>> strides = NonNegativeStrides(host_layout, dims_, element_size);
  if (!strides.ok()) return strides.status();
  return StridedExtent(dims_, *strides, element_size);
}

StatusOr<std::shared_ptr<Completion>> Buffer::ToHost(
    void* dst, size_t dst_size, const PJRT_Buffer_MemoryLayout* host_layout) const {
  StatusOr<std::shared_ptr<Allocation>> allocation = this->allocation();
  if (!allocation.ok()) return allocation.status();
  const int64_t element_size = ElementSize(dtype_);
  StatusOr<std::vector<int64_t>> strides = NonNegativeStrides(host_layout, dims_, element_size);
  if (!strides.ok()) return strides.status();
  const int64_t needed = StridedExtent(dims_, *strides, element_size);
  if (static_cast<int64_t>(dst_size) < needed) {
    return InvalidArgument("destination holds " + std::to_string(dst_size) + " bytes; the " +
                           ShapeString(element_type(), dims_) + " array needs " +
                           std::to_string(needed));
  }
  if (dst == nullptr && needed > 0) return InvalidArgument("destination is NULL");
  return CopyWhenReady(ready_, [source = std::move(*allocation), dims = dims_,
                                strides = std::move(*strides), dst, element_size] {
    CopyStrided(source->data(), DenseByteStrides(dims, element_size), static_cast<uint8_t*>(dst),
                strides, dims, element_size);
  });
}

StatusOr<std::shared_ptr<Completion>> Buffer::CopyRawToHost(void* dst, int64_t offset,
                                                            int64_t size) const {
  StatusOr<std::shared_ptr<Allocation>> allocation = this->allocation();
  if (!allocation.ok()) return allocation.status();
  if (offset < 0 || size < 0 || offset > byte_size_ || size > byte_size_ - offset) {
    return InvalidArgument("raw copy of " + std::to_string(size) + " bytes at offset " +
                           std::to_string(offset) + " is outside the " +
                           std::to_string(byte_size_) + "-byte buffer");
  }
  return CopyWhenReady(ready_, [source = std::move(*allocation), dst, offset, size] {
    if (size > 0) std::memcpy(dst, source->data() + offset, size);
  });
}

StatusOr<std::unique_ptr<Buffer>> Buffer::CopyTo(Memory* memory) const {
  StatusOr<std::shared_ptr<Allocation>> source = this->allocation();
  if (!source.ok()) return source.status();
  StatusOr<std::shared_ptr<Allocation>> copy = Allocation::Create(memory, byte_size_);
  if (!copy.ok()) return copy.status();
  std::shared_ptr<Completion> copied =
      CopyWhenReady(ready_, [source = std::move(*source), target = *copy, size = byte_size_] {
        std::memcpy(target->data(), source->data(), size);
      });
  return std::make_unique<Buffer>(dtype_, dims_, std::move(*copy), std::move(copied));
}

bool Buffer::donatable() const {
  std::lock_guard<std::mutex> lock(mu_);
  return external_references_ == 0 && !is_deleted();
}

void Buffer::IncreaseExternalReferenceCount() {
  std::lock_guard<std::mutex> lock(mu_);
  ++external_references_;
}

Status Buffer::DecreaseExternalReferenceCount() {
  std::lock_guard<std::mutex> lock(mu_);
  if (external_references_ == 0) {
    return FailedPrecondition("external reference count of the buffer is already zero");
  }
  --external_references_;
  return Status::Ok();
}

}  // namespace trn::pjrt
