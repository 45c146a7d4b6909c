// The state one execution works on: SBUF and PSUM of one NeuronCore, and the HBM tensors bound
// for this execution (parameters and constants read-only, outputs and temporaries writable).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "program.h"
#include "strided_view.h"

namespace trn::sim {

// Zero-filled storage from calloc, so pages a program never touches cost nothing.
class ZeroedBuffer {
 public:
  explicit ZeroedBuffer(size_t bytes)
      : data_(static_cast<uint8_t*>(std::calloc(bytes + 1, 1))) {}
  bool ok() const { return data_ != nullptr; }
  uint8_t* data() { return data_.get(); }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> data_;
};

// SBUF or PSUM: `partitions` rows of `bytes_per_partition`.
class TileMemory {
 public:
  TileMemory(int partitions, int64_t bytes_per_partition)
      : bytes_per_partition_(bytes_per_partition), storage_(partitions * bytes_per_partition) {}
  bool ok() const { return storage_.ok(); }
  int64_t bytes_per_partition() const { return bytes_per_partition_; }
  uint8_t* partition(int p) { return storage_.data() + p * bytes_per_partition_; }

 private:
  int64_t bytes_per_partition_;
  ZeroedBuffer storage_;
};

struct HbmTensor {
  uint8_t* data;
  int64_t byte_size;
};

struct Machine {
  Machine(const Program& program);
  const Program& program;
  TileMemory sbuf;
  TileMemory psum;
  std::vector<HbmTensor> hbm;  // indexed like program.tensors
  std::vector<ZeroedBuffer> temporaries;  // owns the temporaries' storage

  StridedView View(const TileAP& ap);
  StridedView View(const HbmAP& ap);
};

}  // namespace trn::sim
