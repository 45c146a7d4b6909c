#include "utilization_accounting.h"

#include <string_view>
#include <variant>

namespace trn::sim {
namespace {

// The engine column of isa.def: POOL instructions are GpSimd's general-purpose path.
bool RunsOnGpSimd(Opcode opcode) {
  switch (opcode) {
#define TRN_OPCODE(Camel, snake, code, engine) \
    case Opcode::k##Camel: return std::string_view(#engine) == "POOL";
#include "isa.def"
  }
  return false;
}

}  // namespace

UtilizationCounts CountUtilization(const Instruction& inst, const InstructionTiming& timing) {
  UtilizationCounts counts;
  switch (inst.opcode) {
    case Opcode::kDmaCopy: {
      // A transfer reads its source and writes its destination; each HBM end is HBM traffic
      // (an HBM->HBM copy moves its bytes twice, an SBUF->SBUF copy not at all).
      const auto& d = std::get<DmaCopy>(inst.operands);
      counts.hbm_bytes = timing.bytes * ((d.dst.is_tile ? 0 : 1) + (d.src.is_tile ? 0 : 1));
      break;
    }
    case Opcode::kMatmul:
      if (RunsAtFp8Rate(std::get<Matmul>(inst.operands))) counts.fp8_matmul_flops = timing.flops;
      break;
    case Opcode::kTranspose:
      counts.transpose_flops = timing.flops;
      break;
    case Opcode::kIota:  // GpSimd on SBUF tiles: no HBM
    case Opcode::kAffineSelect:
      break;
    default:
      // GpSimd general-path instructions address HBM directly: every byte they touch is HBM
      // traffic. The other engines touch only SBUF and PSUM.
      if (RunsOnGpSimd(inst.opcode)) counts.hbm_bytes = timing.bytes;
      break;
  }
  return counts;
}

}  // namespace trn::sim
