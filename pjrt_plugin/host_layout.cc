#include "host_layout.h"

#include <cstring>
#include <string>

namespace trn::pjrt {

std::vector<int64_t> DenseByteStrides(const std::vector<int64_t>& dims, int64_t element_size) {
  std::vector<int64_t> strides(dims.size());
  int64_t stride = element_size;
  for (size_t i = dims.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= dims[i];
  }
  return strides;
}

StatusOr<std::vector<int64_t>> HostByteStrides(const PJRT_Buffer_MemoryLayout* layout,
                                               const std::vector<int64_t>& dims,
                                               int64_t element_size) {
  if (layout == nullptr) return DenseByteStrides(dims, element_size);
  const size_t rank = dims.size();
  if (layout->type == PJRT_Buffer_MemoryLayout_Type_Strides) {
    const PJRT_Buffer_MemoryLayout_Strides& s = layout->strides;
    if (s.num_byte_strides != rank || (rank > 0 && s.byte_strides == nullptr)) {
      return InvalidArgument("host layout has " + std::to_string(s.num_byte_strides) +
                             " byte strides for a rank-" + std::to_string(rank) + " array");
    }
    return std::vector<int64_t>(s.byte_strides, s.byte_strides + rank);
  }
  if (layout->type != PJRT_Buffer_MemoryLayout_Type_Tiled) {
    return InvalidArgument("unknown host layout type " + std::to_string(layout->type));
  }
  const PJRT_Buffer_MemoryLayout_Tiled& t = layout->tiled;
  if (t.num_tiles > 0) {
    return Unimplemented("tiled host layouts are not supported; ask for a dense layout");
  }
  if (t.minor_to_major_size != rank || (rank > 0 && t.minor_to_major == nullptr)) {
    return InvalidArgument("host layout minor_to_major has " +
                           std::to_string(t.minor_to_major_size) + " entries for a rank-" +
                           std::to_string(rank) + " array");
  }
  std::vector<int64_t> strides(rank, -1);
  int64_t stride = element_size;
  for (size_t i = 0; i < rank; ++i) {
    int64_t d = t.minor_to_major[i];
    if (d < 0 || d >= static_cast<int64_t>(rank) || strides[d] != -1) {
      return InvalidArgument("host layout minor_to_major is not a permutation of 0.." +
                             std::to_string(rank - 1));
    }
    strides[d] = stride;
    stride *= dims[d];
  }
  return strides;
}

int64_t StridedExtent(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                      int64_t element_size) {
  int64_t last = 0;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0) return 0;
    last += (dims[i] - 1) * strides[i];
  }
  return last + element_size;
}

void CopyStrided(const uint8_t* src, const std::vector<int64_t>& src_strides, uint8_t* dst,
                 const std::vector<int64_t>& dst_strides, const std::vector<int64_t>& dims,
                 int64_t element_size) {
  for (int64_t d : dims) {
    if (d == 0) return;
  }
  // Fold the innermost dimensions that are contiguous in both layouts into one run.
  size_t outer = dims.size();
  int64_t run = element_size;
  while (outer > 0 && src_strides[outer - 1] == run && dst_strides[outer - 1] == run) {
    run *= dims[outer - 1];
    --outer;
  }
  std::vector<int64_t> index(outer, 0);
  int64_t src_offset = 0, dst_offset = 0;
  while (true) {
    std::memcpy(dst + dst_offset, src + src_offset, run);
    size_t d = outer;
    while (d > 0) {
      --d;
      src_offset += src_strides[d];
      dst_offset += dst_strides[d];
      if (++index[d] < dims[d]) break;
      src_offset -= src_strides[d] * dims[d];
      dst_offset -= dst_strides[d] * dims[d];
      index[d] = 0;
      if (d == 0) return;
    }
    if (outer == 0) return;
  }
}

}  // namespace trn::pjrt
