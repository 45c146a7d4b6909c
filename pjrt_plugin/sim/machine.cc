#include "machine.h"

namespace trn::sim {

Machine::Machine(const Program& program)
    : program(program),
      sbuf(program.target->partitions, program.target->sbuf_bytes_per_partition),
      psum(program.target->partitions, program.target->psum_banks * program.target->psum_bank_bytes),
      hbm(program.tensors.size(), HbmTensor{nullptr, 0}) {}

StridedView Machine::View(const TileAP& ap) {
  TileMemory& memory = ap.memory == Memory::kSbuf ? sbuf : psum;
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
