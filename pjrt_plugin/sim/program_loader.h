// Parses program bytes (docs/program-format.md) into a Program, trusting nothing: every length,
// index, dtype, partition rule and memory bound is checked, and the first problem is reported as
// kInvalidArgument naming the byte offset (and the instruction) and what was expected.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "program.h"
#include "status.h"

namespace trn::sim {

StatusOr<std::unique_ptr<Program>> ParseProgram(const uint8_t* data, size_t size);

// The per-opcode rules (engine constraints, shapes, dtypes, writable destinations) of one parsed
// instruction; instruction_rules.cc.
Status CheckInstruction(const Program& program, const Instruction& inst);

}  // namespace trn::sim
