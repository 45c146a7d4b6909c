// The state one execution works on: SBUF and PSUM of one NeuronCore, and the HBM tensors bound
// for this execution (parameters and constants read-only, outputs and temporaries writable).
#pragma once

#include <array>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

#include "dma_bandwidth.h"
#include "program.h"
#include "strided_view.h"

namespace trn::sim {

class CollectiveSession;  // collectives.h

// Zero-filled storage, so every execution starts from the same (zero) state. A large buffer is
// mapped fresh from the kernel, so pages a program never touches cost nothing (calloc would not
// do: once glibc has recycled a large block it memsets it, and zeroing 28 MiB of SBUF dominated
// small executions). A small one comes from calloc: a fresh mapping costs two system calls and a
// page fault per page (the kernel zeroes each page too), a quarter of an eager op's host time.
// Mappings of a few MiB and more ask for transparent huge pages: tiles stride a partition's
// bytes (192 KiB on trn2), so every row of an operand was another 4 KiB page's TLB miss.
class ZeroedBuffer {
 public:
  explicit ZeroedBuffer(size_t bytes);
  ~ZeroedBuffer();
  ZeroedBuffer(ZeroedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        mapped_(other.mapped_) {}
  ZeroedBuffer(const ZeroedBuffer&) = delete;
  ZeroedBuffer& operator=(const ZeroedBuffer&) = delete;
  ZeroedBuffer& operator=(ZeroedBuffer&&) = delete;

  bool ok() const { return data_ != nullptr; }
  uint8_t* data() { return data_; }
  // Back to all zeros, for reuse by another execution.
  void Rezero();

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;  // mmap'ed (else calloc'ed)
};

// SBUF or PSUM: `partitions` rows of `bytes_per_partition`.
class TileMemory {
 public:
  TileMemory(int partitions, int64_t bytes_per_partition)
      : partitions_(partitions),
        bytes_per_partition_(bytes_per_partition),
        storage_(partitions * bytes_per_partition) {}
  bool ok() const { return storage_.ok(); }
  int partitions() const { return partitions_; }
  int64_t bytes_per_partition() const { return bytes_per_partition_; }
  uint8_t* partition(int p) { return storage_.data() + p * bytes_per_partition_; }

 private:
  int partitions_;
  int64_t bytes_per_partition_;
  ZeroedBuffer storage_;
};

struct HbmTensor {
  uint8_t* data;
  int64_t byte_size;
};

// SBUF and PSUM start each execution with unspecified contents, as on the chip: the compiler's
// waits order every read after its write, so a valid program's results do not depend on them.
// Each thread keeps its SBUF/PSUM between executions; mapping 28 MiB afresh each time cost
// more than running a small program. A program on two physical cores (an LNC=2 device) has two
// of each: tile operands always address the executing core's own (`core`, set by the executor
// before each instruction), so no instruction can reach the other core's.
struct Machine {
  Machine(const Program& program);
  const Program& program;
  std::array<TileMemory*, kMaxCores> sbufs{}, psums{};  // [program.cores] set
  int core = 0;  // the physical core of the instruction being run
  bool ok() const;  // every core's SBUF and PSUM could be mapped
  std::vector<HbmTensor> hbm;  // indexed like program.tensors
  // Timing state of this execution: the chip's HBM, shared by the device's cores, and each
  // core's DMA engines, shared by the transfers of all its queues.
  ChipHbmBandwidth chip_hbm;
  std::vector<CoreDmaBandwidth> dma_bandwidth;  // one per core of the program
  // The cores of this execution (null: a one-core execution) and this core's rank among them;
  // collectives_run counts the collectives this core has reached (their rendezvous key).
  CollectiveSession* collectives = nullptr;
  int rank = 0;
  int64_t collectives_run = 0;

  StridedView View(const TileAP& ap);
  StridedView View(const HbmAP& ap);
};

}  // namespace trn::sim
