#include "program.h"

namespace trn::sim {

std::string OpcodeName(uint16_t opcode) {
  switch (opcode) {
#define TRN_OPCODE(Camel, snake, code, engine) case code: return #snake;
#include "isa.def"
    // Block exits share the opcode space (docs/program-format.md); `end` is no instruction.
    case static_cast<uint16_t>(ControlOp::kJump): return "jump";
    case static_cast<uint16_t>(ControlOp::kBranch): return "branch";
    case static_cast<uint16_t>(ControlOp::kSwitch): return "switch";
  }
  return "opcode(" + std::to_string(opcode) + ")";
}

std::string DescribeDebug(const Program& program, uint32_t debug_id) {
  if (debug_id >= program.debug.size()) return "; debug id " + std::to_string(debug_id);
  const DebugInfo& debug = program.debug[debug_id];
  std::string text;
  if (!debug.op.empty() || !debug.name.empty()) text += "; " + debug.op + " \"" + debug.name + "\"";
  if (!debug.location.empty()) text += " at " + debug.location;
  return text;
}

std::string DescribeInstruction(const Program& program, size_t block, int stream, size_t index) {
  const Instruction& inst = program.blocks[block].streams[stream][index];
  std::string text = (program.blocks.size() > 1 ? "block " + std::to_string(block) + " " : std::string()) +
                     StreamName(stream) + " instruction " + std::to_string(index) + " (" +
                     OpcodeName(static_cast<uint16_t>(inst.opcode));
  return text + DescribeDebug(program, inst.debug_id) + ")";
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
