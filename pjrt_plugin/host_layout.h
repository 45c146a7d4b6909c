// Host arrays in any byte-strided layout, copied to and from the dense row-major storage that
// device buffers use. JAX hands numpy arrays with arbitrary positive strides to
// BufferFromHostBuffer and asks for readback in a host layout it chooses.
#pragma once

#include <cstdint>
#include <vector>

#include "pjrt_c_api.h"
#include "sim/status.h"

namespace trn::pjrt {

std::vector<int64_t> DenseByteStrides(const std::vector<int64_t>& dims, int64_t element_size);

// The byte strides `layout` describes for an array of `dims` (NULL: dense row-major).
// Tiled layouts are accepted as dimension permutations without tiles; tiles give UNIMPLEMENTED.
StatusOr<std::vector<int64_t>> HostByteStrides(const PJRT_Buffer_MemoryLayout* layout,
                                               const std::vector<int64_t>& dims,
                                               int64_t element_size);

// Bytes from the array's first element to one past its furthest one (0 for an empty array).
// Strides must be non-negative.
int64_t StridedExtent(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                      int64_t element_size);

// Copies every element of an array of `dims` from `src` (laid out by `src_strides`) to `dst`
// (laid out by `dst_strides`). Runs that are contiguous in both are copied in one piece, so a
// dense-to-dense copy is a single memcpy whatever its size.
void CopyStrided(const uint8_t* src, const std::vector<int64_t>& src_strides, uint8_t* dst,
                 const std::vector<int64_t>& dst_strides, const std::vector<int64_t>& dims,
                 int64_t element_size);

}  // namespace trn::pjrt
