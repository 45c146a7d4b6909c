// A region program (docs/program-format.md, "Region programs"): the body of a StableHLO reduce,
// reduce_window, scatter or sort comparator as a short list of ALU steps over typed registers,
// which the gp_region_* instructions evaluate for many element tuples at once. Registers
// 0..args-1 are the region's arguments; step i writes register args + i; every step's value is
// rounded to its register's dtype (narrow floats round, narrow integers wrap), as XLA's CPU
// emitter does by computing each op in its own type.
#pragma once

#include <cstdint>
#include <vector>

#include "alu.h"
#include "dtype.h"
#include "status.h"

namespace trn::sim {

struct RegionStep {
  uint8_t code;  // an ALU op code, kRegionConstant or kRegionBitcast (isa.def)
  DType dtype;   // the register it writes
  int64_t a, b, c;  // operand registers (a: a constant's bits for kRegionConstant)
};

struct RegionProgram {
  std::vector<DType> args;
  std::vector<int64_t> results;  // registers
  std::vector<RegionStep> steps;

  DType RegisterDType(int64_t r) const { return r < static_cast<int64_t>(args.size()) ? args[r] : steps[r - args.size()].dtype; }
};

// Decodes and checks the format's i64 words: args, results, steps, then the args' dtype codes,
// the result registers and five words per step (code, dtype, a, b, c).
StatusOr<RegionProgram> DecodeRegion(const std::vector<int64_t>& words);

// The region's results for args.size() tuples side by side: args[i] holds argument i of every
// tuple in its dtype's compute domain; each result comes back in its dtype's compute domain.
std::vector<Values> EvaluateRegion(const RegionProgram& region, const std::vector<Values>& args);

// v[at[0]], v[at[1]], ... as a new array of v's domain.
Values PickElements(const Values& v, const std::vector<int64_t>& at);
// v[at[k]] = from[k] for every k.
void PutElements(Values& v, const std::vector<int64_t>& at, const Values& from);

// v rounded to `dtype`, as a store to memory and a load back would round it.
void RoundToDType(DType dtype, Values& v);

}  // namespace trn::sim
