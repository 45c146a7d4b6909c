#include "program_loader.h"

#include <algorithm>
#include <string>
#include <string_view>

#include "program_parser.h"

namespace trn::sim {
namespace loader {
namespace {

constexpr char kMagic[8] = {'T', 'R', 'N', 'P', 'R', 'O', 'G', '\0'};
// Version 2 added blocks and control flow; a version 1 program (one stream list) still loads, as
// one block that ends the program. Version 4 added each stream's counted loops, version 5 the
// collective's algorithm, version 6 the physical core count (an LNC=2 device's two cores),
// version 7 loop steps of tile operands (step kind 3).
constexpr uint32_t kVersion = 7;
constexpr uint32_t kOldestVersion = 1;

}  // namespace

StatusOr<std::unique_ptr<Program>> Parser::Parse() {
  char magic[8];
  for (char& c : magic) c = static_cast<char>(in_.Read<uint8_t>("magic"));
  if (in_.ok() && std::memcmp(magic, kMagic, 8) != 0) in_.Fail(0, "bad magic: not a NeuronCore program (expected \"TRNPROG\\0\")");
  const uint32_t version = in_.Read<uint32_t>("version");
  version_ = version;
  if (in_.ok() && (version < kOldestVersion || version > kVersion)) {
    in_.Fail(8, "program format version " + std::to_string(version) + ", this runtime reads versions " +
                    std::to_string(kOldestVersion) + " to " + std::to_string(kVersion));
  }
  const size_t target_at = in_.offset();
  const std::string target = in_.String("target name");
  if (in_.ok()) {
    program_->target = FindTarget(target);
    if (program_->target == nullptr) in_.Fail(target_at, "unknown target \"" + target + "\" (expected one of " + KnownTargets() + ")");
  }
  if (version >= 6 && in_.ok()) {
    const size_t cores_at = in_.offset();
    const uint8_t cores = in_.Read<uint8_t>("core count");
    const int most = program_->target != nullptr ? std::min(kMaxCores, program_->target->default_lnc) : kMaxCores;
    if (in_.ok() && (cores < 1 || cores > most)) {
      in_.Fail(cores_at, std::to_string(cores) + " physical cores: a " + target + " program runs on 1" +
                             (most > 1 ? " to " + std::to_string(most) : std::string()) + " (the cores of one logical device)");
    }
    program_->cores = cores;
  }
  ParseTensors();
  if (version == 1) {
    program_->blocks.emplace_back();
    ParseStreams(program_->blocks.back());
  } else {
    ParseBlocks();
  }
  // Version 3 added each entry's lowering and rule (two more strings).
  const bool has_lowering = version >= 3;
  program_->debug_offset = in_.offset();
  const uint32_t debug_count = in_.Count("debug table length", has_lowering ? 20 : 12);
  for (uint32_t i = 0; i < debug_count && in_.ok(); ++i) {
    DebugInfo entry;
    entry.op = in_.String("debug op");
    entry.name = in_.String("debug name");
    entry.location = in_.String("debug location");
    if (has_lowering) {
      entry.lowering = in_.String("debug lowering");
      entry.rule = in_.String("debug rule");
    }
    program_->debug.push_back(std::move(entry));
  }
  program_->source = in_.String("source text");
  if (in_.ok() && !in_.AtEnd()) in_.Fail("trailing bytes after the source text");
  if (!in_.ok()) return in_.status();
  const Status blocks = CheckBlocks();
  if (!blocks.ok()) return blocks;
  program_->streams = program_->blocks[0].streams;
  return std::move(program_);
}

// What can only be checked once the whole program is read: debug ids, block targets, and each
// instruction's rules (instruction_rules.cc), reported with the instruction's debug entry.
Status Parser::CheckBlocks() const {
  const size_t num_debug = program_->debug.size(), num_blocks = program_->blocks.size();
  for (size_t b = 0; b < num_blocks; ++b) {
    const Block& block = program_->blocks[b];
    const std::string where = num_blocks > 1 ? "block " + std::to_string(b) + " " : "";
    for (int s = 0; s < program_->num_streams(); ++s) {
      const auto& insts = block.streams[s];
      for (size_t i = 0; i < insts.size(); ++i) {
        if (insts[i].debug_id >= num_debug) {
          return InvalidArgument("malformed program: " + where + StreamName(s) + " instruction " + std::to_string(i) +
                                 " has debug id " + std::to_string(insts[i].debug_id) + " but the debug table has " +
                                 std::to_string(num_debug) + " entries");
        }
        const Status rule = CheckInstruction(*program_, insts[i]);
        if (!rule.ok()) return InvalidArgument("malformed program: " + DescribeInstruction(*program_, b, s, i) + ": " + rule.message());
      }
    }
    TRN_RETURN_IF_ERROR(CheckLoops(b));
    const BlockExit& exit = block.exit;
    if (exit.op == ControlOp::kEnd) continue;
    const std::string name = "block " + std::to_string(b) + " exit (" + OpcodeName(static_cast<uint16_t>(exit.op)) + ")";
    if (exit.debug_id >= num_debug) {
      return InvalidArgument("malformed program: " + name + " has debug id " + std::to_string(exit.debug_id) +
                             " but the debug table has " + std::to_string(num_debug) + " entries");
    }
    for (uint32_t target : exit.targets) {
      if (target >= num_blocks) {
        return InvalidArgument("malformed program: " + name + " targets block " + std::to_string(target) +
                               " but the program has " + std::to_string(num_blocks) + " blocks");
      }
    }
  }
  return Status::Ok();
}

// Every iteration of every loop, checked without enumerating them: wait counts and HBM offsets
// are affine in the iterations of the loops holding an instruction, so the corner of all first
// iterations (checked with the stored instruction) and the corners of last iterations bound them all.
Status Parser::CheckLoops(size_t b) const {
  const Block& block = program_->blocks[b];
  for (int s = 0; s < program_->num_streams(); ++s) {
    if (block.ExecutedCount(s) > UINT32_MAX) {
      return InvalidArgument("malformed program: " + std::string(program_->blocks.size() > 1 ? "block " + std::to_string(b) + " " : "") +
                             StreamName(s) + " executes " + std::to_string(block.ExecutedCount(s)) +
                             " instructions per block entry (at most 2^32-1: semaphores count them in 32 bits)");
    }
    const std::vector<StreamLoop>& loops = block.loops[s];
    for (size_t index = 0; index < block.streams[s].size() && !loops.empty(); ++index) {
      const std::vector<int> chain = block.EnclosingLoops(s, index);
      if (chain.empty()) continue;
      const Instruction& inst = block.streams[s][index];
      const auto steps = [&](int loop) -> const InstructionSteps& { return loops[loop].body[index - loops[loop].first]; };
      // The iterations of `chain`'s loops where a quantity with these per-loop steps is largest.
      const auto corner = [&](const auto& step, bool largest) {
        std::string text;
        for (int loop : chain) {
          const int64_t i = (step(loop) > 0) == largest && step(loop) != 0 ? loops[loop].count - 1 : 0;
          text += (text.empty() ? "" : ", ") + std::to_string(i);
        }
        return chain.size() > 1 ? "iterations (" + text + ")" : "iteration " + text;
      };
      std::string counts;
      for (int loop : chain) counts += (counts.empty() ? "" : " x ") + std::to_string(loops[loop].count);
      const auto fail = [&](const std::string& message) {
        return InvalidArgument("malformed program: " + DescribeInstruction(*program_, b, s, index) + " in a loop of " + counts +
                               " iterations: " + message);
      };
      for (size_t w = 0; w < inst.waits.size(); ++w) {
        // Wait steps and iterations are below 2^32 each, at most kMaxLoopDepth terms: 128 bits hold the sum.
        unsigned __int128 final_count = inst.waits[w].count;
        for (int loop : chain) final_count += static_cast<unsigned __int128>(steps(loop).wait_steps[w]) * (loops[loop].count - 1);
        const int64_t available = block.ExecutedCount(inst.waits[w].stream);
        if (final_count > static_cast<unsigned __int128>(available)) {
          const auto wait_step = [&](int loop) { return steps(loop).wait_steps[w]; };
          return fail("at " + corner(wait_step, true) + " it waits for " + StreamName(inst.waits[w].stream) + ">=" +
                      (final_count > UINT64_MAX ? std::string("2^64 or more") : std::to_string(static_cast<uint64_t>(final_count))) +
                      " but that stream executes " + std::to_string(available) + " instructions in the block: the wait can never be met");
        }
      }
      // Each moved HBM operand: the least and the most its offset moves over all iterations.
      std::vector<HbmAP*> hbm = HbmOperands(const_cast<Operands&>(inst.operands));
      for (size_t operand = 0; operand < hbm.size(); ++operand) {
        const auto hbm_step = [&](int loop) {
          for (const auto& [i, step] : steps(loop).hbm_steps) if (static_cast<size_t>(i) == operand) return step;
          return int64_t{0};
        };
        int64_t least = 0, most = 0;
        std::string step_text;
        for (int loop : chain) {
          int64_t moved;
          const int64_t step = hbm_step(loop);
          if (__builtin_mul_overflow(step, int64_t{loops[loop].count} - 1, &moved) || moved > (int64_t{1} << 58) ||
              moved < -(int64_t{1} << 58)) {
            return fail("HBM operand " + std::to_string(operand) + " moves " + std::to_string(step) + " elements per iteration: past any tensor");
          }
          (moved < 0 ? least : most) += moved;
          if (step != 0) step_text += (step_text.empty() ? "" : ", ") + std::to_string(step);
        }
        if (step_text.empty()) continue;
        const HbmAP& ap = *hbm[operand];
        int64_t below = 0, above = 0;  // the pattern's extent around its offset
        for (int d = 0; d < ap.num_dims; ++d) (ap.dims[d].stride < 0 ? below : above) += ap.dims[d].stride * (ap.dims[d].count - 1);
        const Tensor& tensor = program_->tensors[ap.tensor];
        // The corner of the most moved offset, then that of the least (where it starts lowest).
        for (const bool largest : {true, false}) {
          const int64_t offset = ap.offset + (largest ? most : least);
          const int64_t low = offset + below, high = offset + above;
          if (low >= 0 && high < tensor.num_elements) continue;
          const bool plural = step_text.find(',') != std::string::npos;
          return fail("at " + corner(hbm_step, largest) + " HBM operand " + std::to_string(operand) + " (offset step" +
                      (plural ? "s " : " ") + step_text + ") covers elements [" + std::to_string(low) + ", " + std::to_string(high) +
                      "] of tensor " + std::to_string(ap.tensor) + " (" + tensor.name + ") which has " +
                      std::to_string(tensor.num_elements));
        }
      }
      const Status tiles = CheckTileSteps(block, s, index, chain);
      if (!tiles.ok()) return fail(tiles.message());
    }
  }
  return Status::Ok();
}

// Each stepped tile at the corner where its fields move least and the one where they move most
// (affine in every counter, or in the turns of a rotation, so those corners bound every
// iteration): inside its memory and partition rules, the instruction's rules (CheckInstruction:
// a matmul's PSUM bank) met, and a PSUM tile that lies in one bank in one bank throughout.
Status Parser::CheckTileSteps(const Block& block, int s, size_t index, const std::vector<int>& chain) const {
  const Instruction& stored = block.streams[s][index];
  const std::vector<StreamLoop>& loops = block.loops[s];
  std::array<Instruction, 2> corners = {stored, stored};  // least, most
  std::vector<std::array<int64_t, 2>> off_bank;  // per tile operand: moves that are not whole banks
  const std::vector<TileAP*> tiles = TileOperands(const_cast<Operands&>(stored.operands));
  off_bank.assign(tiles.size(), {0, 0});
  // Per corner: which iteration of which loop puts each step at its extreme ("iteration 3 of
  // loop 1 (4 iterations)" per step), for the error.
  std::array<std::string, 2> at;
  for (int loop : chain) {
    const int64_t count = loops[loop].count;
    for (const TileStep& step : loops[loop].body[index - loops[loop].first].tile_steps) {
      const auto [least, most] = step.Span(count);
      const std::array<int64_t, 2> turns = {step.step >= 0 ? least : most, step.step >= 0 ? most : least};
      for (int c = 0; c < 2; ++c) {
        TileAP& tile = *TileOperands(corners[c].operands)[step.operand];
        const int64_t value = (step.field == TileField::kByteOffset ? int64_t{tile.byte_offset} : int64_t{tile.partition_start}) +
                              turns[c] * step.step;
        const int64_t iteration = turns[c] >= 0 ? turns[c] : step.period + turns[c];
        at[c] += (at[c].empty() ? "" : ", ") + std::string("tile operand ") + std::to_string(step.operand) +
                 (step.field == TileField::kByteOffset ? " byte offset " : " partition start ") + std::to_string(value) +
                 " (step " + std::to_string(step.step) + (step.period ? " period " + std::to_string(step.period) : "") +
                 ") at iteration " + std::to_string(iteration) + " of " + std::to_string(count);
        if (value < 0 || value > UINT32_MAX) return InvalidArgument(at[c] + ": outside any memory");
        MoveTile(tile, step, turns[c]);
      }
      if (step.field == TileField::kByteOffset && step.step % program_->target->psum_bank_bytes != 0) {
        off_bank[step.operand][0] += turns[0] * step.step;
        off_bank[step.operand][1] += turns[1] * step.step;
      }
    }
  }
  const std::string& text = at[1];
  if (text.empty()) return Status::Ok();
  const TargetSpec& t = *program_->target;
  for (int c = 0; c < 2; ++c) {
    for (TileAP* tile : TileOperands(corners[c].operands)) {
      const std::string error = TilePlacementError(t, *tile);
      if (!error.empty()) return InvalidArgument(at[c] + ": " + error);
    }
    const Status rules = CheckInstruction(*program_, corners[c]);
    if (!rules.ok()) return InvalidArgument(at[c] + ": " + rules.message());
  }
  for (size_t k = 0; k < tiles.size(); ++k) {
    const TileAP& tile = *tiles[k];
    if (tile.memory != Memory::kPsum || (off_bank[k][0] == 0 && off_bank[k][1] == 0)) continue;
    int64_t low = 0, high = 0;
    for (int d = 0; d < tile.num_free; ++d) {
      const int64_t extent = int64_t{tile.free[d].stride} * (int64_t{tile.free[d].count} - 1);
      (extent < 0 ? low : high) += extent;
    }
    const int64_t size = DTypeSize(tile.dtype), bank = t.psum_bank_bytes;
    const int64_t first = tile.byte_offset + low * size, last = tile.byte_offset + (high + 1) * size - 1;
    if (first / bank == last / bank && (first + off_bank[k][0]) / bank != (last + off_bank[k][1]) / bank) {
      return InvalidArgument("PSUM tile operand " + std::to_string(k) +
                             " leaves its bank in some iteration (bytes [" + std::to_string(first + off_bank[k][0]) + ", " +
                             std::to_string(last + off_bank[k][1] + 1) + ") over the iterations; a step within one bank " +
                             "keeps every iteration in it, or moves by whole banks of " + std::to_string(bank) + " bytes)" +
                             " (steps: " + text + ")");
    }
  }
  return Status::Ok();
}

void Parser::ParseBlocks() {
  // A block takes at least 4 (stream count) + 2 (exit opcode) + 4 (exit debug id) bytes.
  const size_t at = in_.offset();
  const uint32_t n = in_.Count("block count", 10);
  if (in_.ok() && n == 0) in_.Fail(at, "a program has at least one block (execution starts at block 0)");
  for (uint32_t b = 0; b < n && in_.ok(); ++b) {
    program_->blocks.emplace_back();
    block_name_ = "block " + std::to_string(b) + " ";
    ParseStreams(program_->blocks.back());
    in_.SetContext(" (" + block_name_ + "exit)");
    ParseExit(program_->blocks.back());
    in_.SetContext("");
  }
  block_name_.clear();
}

void Parser::ParseExit(Block& block) {
  BlockExit& exit = block.exit;
  const size_t at = in_.offset();
  const uint16_t op = in_.Read<uint16_t>("exit opcode");
  exit.debug_id = in_.Read<uint32_t>("exit debug id");
  if (!in_.ok()) return;
  switch (static_cast<ControlOp>(op)) {
    case ControlOp::kEnd:
      exit.op = ControlOp::kEnd;
      return;
    case ControlOp::kJump:
      exit.op = ControlOp::kJump;
      exit.targets.push_back(in_.Read<uint32_t>("jump target"));
      return;
    case ControlOp::kBranch:
    case ControlOp::kSwitch: {
      exit.op = static_cast<ControlOp>(op);
      const bool branch = exit.op == ControlOp::kBranch;
      const size_t selector_at = in_.offset();
      exit.selector = ReadHbm();
      if (!in_.ok()) return;
      const DType dtype = program_->tensors[exit.selector.tensor].dtype;
      if (exit.selector.num_elements() != 1) {
        in_.Fail(selector_at, std::string(branch ? "branch predicate" : "switch index") + " addresses " +
                                  std::to_string(exit.selector.num_elements()) + " elements (expected 1)");
      } else if (IsFloat(dtype) || (!branch && dtype == DType::kPred)) {
        in_.Fail(selector_at, std::string(branch ? "branch predicate must be pred or an integer"
                                                 : "switch index must be an integer") +
                                  ", got " + DTypeName(dtype));
      }
      if (branch) {
        exit.targets.push_back(in_.Read<uint32_t>("branch target if true"));
        exit.targets.push_back(in_.Read<uint32_t>("branch target if false"));
        return;
      }
      const size_t count_at = in_.offset();
      const uint32_t n = in_.Count("switch target count", 4);
      if (in_.ok() && n == 0) in_.Fail(count_at, "switch has no targets");
      for (uint32_t i = 0; i < n && in_.ok(); ++i) exit.targets.push_back(in_.Read<uint32_t>("switch target"));
      return;
    }
  }
  in_.Fail(at, "unknown exit opcode " + std::to_string(op) + " (expected 0 end, 8 jump, 9 branch or 10 switch)");
}

void Parser::ParseTensors() {
  const uint32_t n = in_.Count("tensor count", 19);
  std::vector<int> parameter_seen, output_seen;
  for (uint32_t i = 0; i < n && in_.ok(); ++i) {
    const size_t at = in_.offset();
    Tensor t;
    t.name = in_.String("tensor name");
    const uint8_t kind = in_.Read<uint8_t>("tensor kind");
    t.index = in_.Read<uint32_t>("tensor index");
    if (kind == static_cast<uint8_t>(TensorKind::kDonatedParameter)) t.output = in_.Read<uint32_t>("donated parameter's output");
    t.dtype = ReadDType("tensor dtype", true, true);
    if (in_.ok() && kind > 4) in_.Fail(at, "tensor " + std::to_string(i) + " has kind " + std::to_string(kind) + " (expected 0..4)");
    t.kind = static_cast<TensorKind>(kind);
    const uint32_t rank = in_.Count("tensor rank", 8);
    t.num_elements = 1;
    for (uint32_t d = 0; d < rank && in_.ok(); ++d) {
      const int64_t dim = in_.Read<int64_t>("tensor dimension");
      if (in_.ok() && (dim < 0 || dim > kMaxElements)) in_.Fail("tensor " + std::to_string(i) + " dimension " + std::to_string(dim) + " out of range");
      t.shape.push_back(dim);
      t.num_elements = dim == 0 ? 0 : t.num_elements * dim;
      if (in_.ok() && t.num_elements > kMaxElements) in_.Fail("tensor " + std::to_string(i) + " has too many elements");
    }
    if (in_.ok() && t.dtype == DType::kC64) {
      if (t.kind != TensorKind::kParameter && t.kind != TensorKind::kOutput) {
        in_.Fail(at, "tensor " + std::to_string(i) + " (" + t.name + ") is c64 but not a parameter or an output");
        return;
      }
      t.complex_pairs = true;
      t.dtype = DType::kF32;
      t.shape.push_back(2);
      t.num_elements *= 2;
    }
    if (in_.ok() && (t.dtype == DType::kS4 || t.dtype == DType::kU4)) {
      if (t.kind != TensorKind::kParameter && t.kind != TensorKind::kOutput) {
        in_.Fail(at, "tensor " + std::to_string(i) + " (" + t.name + ") is " + DTypeName(t.dtype) + " but not a parameter or an output");
        return;
      }
      t.nibbles = true;
      t.dtype = t.dtype == DType::kS4 ? DType::kS8 : DType::kU8;
    }
    t.byte_size = t.num_elements * DTypeSize(t.dtype);
    t.data = in_.Blob("tensor data");
    if (!in_.ok()) return;
    const bool constant = t.kind == TensorKind::kConstant;
    if (static_cast<int64_t>(t.data.size()) != (constant ? t.byte_size : 0)) {
      in_.Fail(at, "tensor " + std::to_string(i) + " (" + t.name + ") has " + std::to_string(t.data.size()) + " data bytes, expected " +
                       std::to_string(constant ? t.byte_size : 0));
      return;
    }
    // A donated parameter is a parameter and an output: it takes a number in both.
    const bool donated = t.kind == TensorKind::kDonatedParameter;
    std::vector<std::pair<std::vector<int>*, uint32_t>> numbers;
    if (t.kind == TensorKind::kParameter || donated) numbers.push_back({&parameter_seen, t.index});
    if (t.kind == TensorKind::kOutput) numbers.push_back({&output_seen, t.index});
    if (donated) numbers.push_back({&output_seen, t.output});
    for (auto [seen, number] : numbers) {
      if (number >= n || (number < seen->size() && (*seen)[number])) {
        in_.Fail(at, "tensor " + std::to_string(i) + " (" + t.name + ") has duplicate or out-of-range " +
                         (seen == &parameter_seen ? "parameter" : "output") + " number " + std::to_string(number));
        return;
      }
      if (seen->size() <= number) seen->resize(number + 1, 0);
      (*seen)[number] = 1;
    }
    program_->tensors.push_back(std::move(t));
  }
  for (const auto* seen : {&parameter_seen, &output_seen}) {
    for (size_t k = 0; k < seen->size(); ++k) {
      if (!(*seen)[k]) in_.Fail(std::string(seen == &parameter_seen ? "parameter" : "output") + " indices skip " + std::to_string(k));
    }
  }
}

void Parser::ParseStreams(Block& block) {
  const uint32_t n = in_.Count("stream count", 5);
  bool seen[kMaxStreams] = {};
  const int streams = program_->num_streams();
  for (uint32_t i = 0; i < n && in_.ok(); ++i) {
    const size_t at = in_.offset();
    const uint8_t id = in_.Read<uint8_t>("stream id");
    if (in_.ok() && (id >= streams || seen[id])) {
      in_.Fail(at, "stream id " + std::to_string(id) + (id >= streams ? " out of range 0.." + std::to_string(streams - 1) + StreamsOfCores() : " appears twice"));
      return;
    }
    seen[id] = true;
    const uint32_t count = in_.Count("instruction count", 10);
    auto& insts = block.streams[id];
    for (uint32_t k = 0; k < count && in_.ok(); ++k) {
      const std::string where = block_name_ + StreamName(id) + " instruction " + std::to_string(k);
      in_.SetContext(" (" + where + ")");
      Instruction inst = ParseInstruction(id, where);
      if (!in_.ok()) return;
      insts.push_back(std::move(inst));
    }
    in_.SetContext("");
    if (version_ >= 4 && in_.ok()) ParseLoops(block, id);
  }
}

namespace {

// What is wrong with a tile step by itself (its operand, field, rotation, and a partition step
// that keeps the partition rules at every iteration: a multiple of the start alignment of the
// tile's partition count), or "". Where the moved tiles lie is CheckLoops'.
std::string TileStepError(Instruction& inst, const InstructionSteps& body, const TileStep& step) {
  const std::vector<TileAP*> tiles = TileOperands(inst.operands);
  if (step.operand >= static_cast<int>(tiles.size())) {
    return "the instruction has " + std::to_string(tiles.size()) + " tile operands";
  }
  if (step.field != TileField::kByteOffset && step.field != TileField::kPartitionStart) {
    return "field " + std::to_string(static_cast<int>(step.field)) + " (expected 0 byte offset or 1 partition start)";
  }
  for (const TileStep& other : body.tile_steps) {
    if (other.operand == step.operand && other.field == step.field) return "given twice";
  }
  if (step.step < -(int64_t{1} << 32) || step.step > (int64_t{1} << 32)) return "|step| above 2^32";
  if (step.period == 1 || (step.period == 0 ? step.phase != 0 : step.phase >= step.period)) {
    return "period " + std::to_string(step.period) + " phase " + std::to_string(step.phase) +
           " (a period is 0, none, or at least 2, and the phase lies in it)";
  }
  if (step.field == TileField::kPartitionStart) {
    const int count = tiles[step.operand]->partition_count;
    const int64_t align = count > 64 ? 0 : count > 32 ? 64 : 32;
    if (align == 0 || step.step % align != 0) {
      return "a tile of " + std::to_string(count) + " partitions " +
             (align ? "moves by multiples of " + std::to_string(align) + " partitions" : "starts at 0 in every iteration");
    }
  }
  return "";
}

}  // namespace

void Parser::ParseLoops(Block& block, int stream) {
  const std::string where = block_name_ + StreamName(stream) + " loop ";
  const auto& insts = block.streams[stream];
  auto& loops = block.loops[stream];
  const uint32_t n = in_.Count("loop count", 16);
  uint32_t end = 0;  // where the previous outermost loop ended
  std::vector<int32_t> open;  // the loops holding the current one, outermost first
  for (uint32_t l = 0; l < n && in_.ok(); ++l) {
    const size_t at = in_.offset();
    StreamLoop loop;
    loop.first = in_.Read<uint32_t>("loop first instruction");
    loop.length = in_.Read<uint32_t>("loop length");
    loop.count = in_.Read<uint32_t>("loop iteration count");
    if (!in_.ok()) return;
    const std::string name = where + std::to_string(l);
    if (loop.length == 0 || loop.count == 0) {
      in_.Fail(at, name + " has " + std::to_string(loop.length) + " instructions and " + std::to_string(loop.count) +
                       " iterations (a loop runs at least one instruction at least once)");
      return;
    }
    // Nesting: a loop starting inside an open loop's body lies inside it (after its earlier
    // nested loops); otherwise it starts after the previous outermost loop.
    const uint64_t loop_end = uint64_t{loop.first} + loop.length;
    while (!open.empty() && loop.first >= loops[open.back()].first + loops[open.back()].length) open.pop_back();
    const bool after_previous = l == 0 || loop.first >= loops[l - 1].first;
    const bool inside = open.empty() ? loop.first >= end
                                     : loop_end <= uint64_t{loops[open.back()].first} + loops[open.back()].length;
    if (!after_previous || !inside || loop_end > insts.size()) {
      in_.Fail(at, name + " covers instructions " + std::to_string(loop.first) + ".." + std::to_string(loop_end - 1) +
                       " but the stream has " + std::to_string(insts.size()) +
                       " and loops are sorted and either disjoint or nested" +
                       (open.empty() ? (l > 0 ? " (the previous loop ends before " + std::to_string(end) + ")" : "")
                                     : " (it starts inside loop " + std::to_string(open.back()) + ", which ends before " +
                                           std::to_string(loops[open.back()].first + loops[open.back()].length) + ")"));
      return;
    }
    if (open.size() + 1 > static_cast<size_t>(kMaxLoopDepth)) {
      in_.Fail(at, name + " is nested " + std::to_string(open.size() + 1) + " deep (at most " +
                       std::to_string(kMaxLoopDepth) + ")");
      return;
    }
    loop.parent = open.empty() ? -1 : open.back();
    if (open.empty()) end = static_cast<uint32_t>(loop_end);
    open.push_back(static_cast<int32_t>(l));
    loop.body.resize(loop.length);
    for (uint32_t k = 0; k < loop.length; ++k) loop.body[k].wait_steps.assign(insts[loop.first + k].waits.size(), 0);
    const uint32_t steps = in_.Count("loop step count", 14);
    for (uint32_t k = 0; k < steps && in_.ok(); ++k) {
      const size_t step_at = in_.offset();
      const uint32_t index = in_.Read<uint32_t>("step instruction");
      const uint8_t kind = in_.Read<uint8_t>("step kind");
      const uint8_t field = in_.Read<uint8_t>("step operand");
      const int64_t step = in_.Read<int64_t>("step");
      if (!in_.ok()) return;
      if (index >= loop.length) {
        in_.Fail(step_at, name + " step names body instruction " + std::to_string(index) + " of " + std::to_string(loop.length));
        return;
      }
      Instruction& inst = block.streams[stream][loop.first + index];
      InstructionSteps& body = loop.body[index];
      const std::string what = name + " body instruction " + std::to_string(index) + " (" + OpcodeName(static_cast<uint16_t>(inst.opcode)) + ")";
      if (kind == 0) {
        if (field >= inst.waits.size() || step < 0 || step > UINT32_MAX) {
          in_.Fail(step_at, what + " wait step " + std::to_string(step) + " on wait " + std::to_string(field) + " of " +
                                std::to_string(inst.waits.size()) + " (a wait step is 0..2^32-1 on an existing wait)");
          return;
        }
        body.wait_steps[field] = step;
      } else if (kind == 1) {
        const size_t num_hbm = HbmOperands(inst.operands).size();
        bool repeated = false;
        for (const auto& [i, s] : body.hbm_steps) repeated |= i == field;
        if (field >= num_hbm || repeated || step < -kMaxElements || step > kMaxElements) {
          in_.Fail(step_at, what + " HBM step " + std::to_string(step) + " on HBM operand " + std::to_string(field) + " of " +
                                std::to_string(num_hbm) + (repeated ? " (given twice)" : ""));
          return;
        }
        body.hbm_steps.emplace_back(field, step);
      } else if (kind == 2) {
        const bool affine = inst.opcode == Opcode::kIota || inst.opcode == Opcode::kAffineSelect;
        if (!affine || field != 0 || body.base_step != 0 || step < -kMaxElements || step > kMaxElements) {
          in_.Fail(step_at, what + " base step " + std::to_string(step) + " on field " + std::to_string(field) +
                                " (an iota's or affine_select's base, field 0, given once, |step| <= 2^48)");
          return;
        }
        body.base_step = step;
      } else if (kind == 3 && version_ >= 7) {
        TileStep tile{field, static_cast<TileField>(in_.Read<uint8_t>("tile step field")), step,
                      in_.Read<uint32_t>("tile step period"), in_.Read<uint32_t>("tile step phase")};
        if (!in_.ok()) return;
        const std::string error = TileStepError(inst, body, tile);
        if (!error.empty()) {
          in_.Fail(step_at, what + " tile step " + std::to_string(step) + " on tile operand " + std::to_string(field) + ": " + error);
          return;
        }
        body.tile_steps.push_back(tile);
      } else {
        in_.Fail(step_at, what + " step kind " + std::to_string(kind) + " (expected 0 wait, 1 HBM offset, 2 affine base" +
                              (version_ >= 7 ? " or 3 tile field)" : "; 3 tile field from version 7 on)"));
        return;
      }
    }
    loops.push_back(std::move(loop));
  }
}

// isa.def's `engine` column: DMA runs on every DMA queue's stream, the others on their engine's.
bool OpcodeRunsOn(uint16_t opcode, int stream_id) {
  const int stream = stream_id % kNumStreams;  // every core has the same engines
  const auto runs_on = [stream](std::string_view engine) {
    return engine == "DMA" ? stream >= kFirstDmaStream : StreamName(stream) == engine;
  };
  switch (opcode) {
#define TRN_OPCODE(Camel, snake, code, engine) case code: return runs_on(#engine);
#include "isa.def"
  }
  return false;
}

// For range errors: which cores' streams the ids cover.
std::string Parser::StreamsOfCores() const {
  return program_->cores == 1 ? ": the program runs on one physical core" : ": the streams of " + std::to_string(program_->cores) + " physical cores";
}

Instruction Parser::ParseInstruction(int stream, const std::string& where) {
  Instruction inst{};
  const size_t at = in_.offset();
  const uint16_t opcode = in_.Read<uint16_t>("opcode");
  if (in_.ok() && (opcode == static_cast<uint16_t>(ControlOp::kJump) || opcode == static_cast<uint16_t>(ControlOp::kBranch) ||
                   opcode == static_cast<uint16_t>(ControlOp::kSwitch))) {
    in_.Fail(at, "control opcode " + OpcodeName(opcode) + " inside a stream: control instructions are block exits");
    return inst;
  }
  if (in_.ok() && OpcodeName(opcode).starts_with("opcode(")) {
    in_.Fail(at, "unknown opcode " + std::to_string(opcode));
    return inst;
  }
  if (in_.ok() && !OpcodeRunsOn(opcode, stream)) {
    in_.Fail(at, "opcode " + OpcodeName(opcode) + " does not run on stream " + StreamName(stream));
    return inst;
  }
  // A collective meets the other devices' programs once per device, a host callback reaches the
  // host once: both belong to the device's first core.
  if (in_.ok() && CoreOfStream(stream) != 0 &&
      (opcode == static_cast<uint16_t>(Opcode::kCollective) || opcode == static_cast<uint16_t>(Opcode::kHostCallback))) {
    in_.Fail(at, "opcode " + OpcodeName(opcode) + " runs on the device's first physical core, not on stream " + StreamName(stream));
    return inst;
  }
  inst.opcode = static_cast<Opcode>(opcode);
  inst.debug_id = in_.Read<uint32_t>("debug id");
  // The debug table follows the blocks: an operand error names the entry by id.
  in_.SetContext(" (" + where + ", " + OpcodeName(opcode) + ", debug id " + std::to_string(inst.debug_id) + ")");
  const uint32_t waits = in_.Count("wait count", 5);
  for (uint32_t i = 0; i < waits && in_.ok(); ++i) {
    const size_t wait_at = in_.offset();
    Wait w{in_.Read<uint8_t>("wait stream"), in_.Read<uint32_t>("wait count")};
    if (in_.ok() && w.stream >= program_->num_streams()) {
      in_.Fail(wait_at, "wait on stream " + std::to_string(w.stream) + " (expected 0.." + std::to_string(program_->num_streams() - 1) + StreamsOfCores() + ")");
    }
    inst.waits.push_back(w);
  }
  if (in_.ok()) inst.operands = ParseOperands(inst.opcode);
  return inst;
}

}  // namespace loader


StatusOr<std::unique_ptr<Program>> ParseProgram(const uint8_t* data, size_t size) {
  if (data == nullptr && size != 0) return InvalidArgument("program bytes are null");
  return loader::Parser(data, size).Parse();
}

}  // namespace trn::sim
