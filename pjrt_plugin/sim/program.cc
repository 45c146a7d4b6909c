#include "program.h"

namespace trn::sim {

std::string OpcodeName(uint16_t opcode) {
  if (opcode == static_cast<uint16_t>(ControlOp::kJump)) return "jump";
  if (opcode == static_cast<uint16_t>(ControlOp::kBranch)) return "branch";
  if (opcode == static_cast<uint16_t>(ControlOp::kSwitch)) return "switch";
  switch (static_cast<Opcode>(opcode)) {
    case Opcode::kDmaCopy: return "dma_copy";
    case Opcode::kMatmul: return "matmul";
    case Opcode::kTranspose: return "transpose";
    case Opcode::kTensorTensor: return "tensor_tensor";
    case Opcode::kTensorScalar: return "tensor_scalar";
    case Opcode::kTensorReduce: return "tensor_reduce";
    case Opcode::kTensorCopy: return "tensor_copy";
    case Opcode::kTensorTernary: return "tensor_ternary";
    case Opcode::kTensorUnary: return "tensor_unary";
    case Opcode::kActivation: return "activation";
    case Opcode::kGpElementwise: return "gp_elementwise";
    case Opcode::kGpCopy: return "gp_copy";
    case Opcode::kGpFill: return "gp_fill";
    case Opcode::kGpIota: return "gp_iota";
    case Opcode::kGpBitcast: return "gp_bitcast";
    case Opcode::kGpReduce: return "gp_reduce";
    case Opcode::kGpBatchMatmul: return "gp_batch_matmul";
    case Opcode::kGpGather: return "gp_gather";
    case Opcode::kGpScatter: return "gp_scatter";
    case Opcode::kGpArgReduce: return "gp_arg_reduce";
    case Opcode::kGpSort: return "gp_sort";
    case Opcode::kGpReduceWindow: return "gp_reduce_window";
    case Opcode::kGpSelectAndScatter: return "gp_select_and_scatter";
    case Opcode::kGpConvolution: return "gp_convolution";
  }
  return "opcode(" + std::to_string(opcode) + ")";
}

int64_t TileAP::free_size() const {
  int64_t n = 1;
  for (int d = 0; d < num_free; ++d) n *= free[d].count;
  return n;
}

bool TileAP::contiguous() const {
  int64_t expected = 1;
  for (int d = num_free - 1; d >= 0; --d) {
    if (free[d].count > 1 && free[d].stride != expected) return false;
    expected *= free[d].count;
  }
  return true;
}

int64_t HbmAP::num_elements() const {
  int64_t n = 1;
  for (int d = 0; d < num_dims; ++d) n *= dims[d].count;
  return n;
}

}  // namespace trn::sim
