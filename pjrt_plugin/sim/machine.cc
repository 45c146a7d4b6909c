#include "machine.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>

namespace trn::sim {

namespace {

// The size from which a ZeroedBuffer is mapped rather than calloc'ed.
constexpr size_t kMapFromBytes = size_t{1} << 20;
// Below this a mapping keeps 4 KiB pages: a huge page would zero 2 MiB on its first touch.
constexpr size_t kHugePageMapping = size_t{4} << 20;

}  // namespace

ZeroedBuffer::ZeroedBuffer(size_t bytes) : size_(bytes + 1), mapped_(size_ >= kMapFromBytes) {
  if (!mapped_) {
    data_ = static_cast<uint8_t*>(std::calloc(size_, 1));
    return;
  }
  void* p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  data_ = p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
#ifdef MADV_HUGEPAGE
  // Advice only: where the kernel has no huge pages the mapping works as before.
  if (data_ != nullptr && size_ >= kHugePageMapping) madvise(data_, size_, MADV_HUGEPAGE);
#endif
}

void ZeroedBuffer::Rezero() {
  if (data_ != nullptr) std::memset(data_, 0, size_);
}

ZeroedBuffer::~ZeroedBuffer() {
  if (data_ == nullptr) return;
  if (mapped_) {
    munmap(data_, size_);
  } else {
    std::free(data_);
  }
}

namespace {

// This thread's tile memory of the given geometry (one per memory kind and physical core;
// reallocated when a program for another target needs another size).
TileMemory& ThreadTileMemory(int kind, int partitions, int64_t bytes_per_partition) {
  thread_local std::unique_ptr<TileMemory> memories[2 * kMaxCores];
  std::unique_ptr<TileMemory>& memory = memories[kind];
  if (!memory || !memory->ok() || memory->partitions() != partitions ||
      memory->bytes_per_partition() != bytes_per_partition) {
    memory = std::make_unique<TileMemory>(partitions, bytes_per_partition);
  }
  return *memory;
}

}  // namespace

Machine::Machine(const Program& program)
    : program(program), hbm(program.tensors.size(), HbmTensor{nullptr, 0}), chip_hbm(*program.target, program.cores) {
  const TargetSpec& t = *program.target;
  for (int c = 0; c < program.cores; ++c) {
    sbufs[c] = &ThreadTileMemory(2 * c, t.partitions, t.sbuf_bytes_per_partition);
    psums[c] = &ThreadTileMemory(2 * c + 1, t.partitions, t.psum_banks * t.psum_bank_bytes);
    dma_bandwidth.emplace_back(t, &chip_hbm);
  }
}

bool Machine::ok() const {
  for (int c = 0; c < program.cores; ++c) {
    if (!sbufs[c]->ok() || !psums[c]->ok()) return false;
  }
  return true;
}

StridedView Machine::View(const TileAP& ap) {
  TileMemory& memory = ap.memory == Memory::kSbuf ? *sbufs[core] : *psums[core];
  const int64_t size = DTypeSize(ap.dtype);
  StridedView view;
  view.base = memory.partition(ap.partition_start) + ap.byte_offset;
  view.dtype = ap.dtype;
  view.rank = 1 + ap.num_free;
  view.stride_bytes[0] = memory.bytes_per_partition();
  view.count[0] = ap.partition_count;
  for (int d = 0; d < ap.num_free; ++d) {
    view.stride_bytes[d + 1] = ap.free[d].stride * size;
    view.count[d + 1] = ap.free[d].count;
  }
  return view;
}

StridedView Machine::View(const HbmAP& ap) {
  const Tensor& tensor = program.tensors[ap.tensor];
  const int64_t size = DTypeSize(tensor.dtype);
  StridedView view;
  view.base = hbm[ap.tensor].data + ap.offset * size;
  view.dtype = tensor.dtype;
  view.rank = ap.num_dims;
  for (int d = 0; d < ap.num_dims; ++d) {
    view.stride_bytes[d] = ap.dims[d].stride * size;
    view.count[d] = ap.dims[d].count;
  }
  return view;
}

}  // namespace trn::sim
