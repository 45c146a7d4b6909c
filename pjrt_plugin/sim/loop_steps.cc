// Counted loops of a stream (format version 4; nested loops too; tile steps version 7): how many
// instructions a stream executes, which loops hold a stored instruction, and an instruction as a
// given iteration runs it.
#include <type_traits>

#include "program.h"

namespace trn::sim {
namespace {

void Add(std::vector<HbmAP*>& out, HbmAP& ap) { out.push_back(&ap); }
void Add(std::vector<HbmAP*>& out, Endpoint& e) {
  if (!e.is_tile) out.push_back(&e.hbm);
}
void Add(std::vector<HbmAP*>& out, std::vector<HbmAP>& list) {
  for (HbmAP& ap : list) out.push_back(&ap);
}

// Each operand struct's HBM access patterns in the order the format encodes them
// (hlo_lowering/program/instructions.py OPERAND_LAYOUT); tile-only structs have none.
template <typename T>
void Collect(std::vector<HbmAP*>& out, T& x) {
  if constexpr (std::is_same_v<T, DmaCopy>) { Add(out, x.dst); Add(out, x.src); }
  else if constexpr (std::is_same_v<T, GpElementwise>) { Add(out, x.dst); Add(out, x.srcs); }
  else if constexpr (std::is_same_v<T, GpCopy>) { Add(out, x.dst); Add(out, x.src); }
  else if constexpr (std::is_same_v<T, GpFill> || std::is_same_v<T, GpIota>) { Add(out, x.dst); }
  else if constexpr (std::is_same_v<T, GpReduce>) { Add(out, x.dst); Add(out, x.src); }
  else if constexpr (std::is_same_v<T, GpBatchMatmul> || std::is_same_v<T, GpConvolution>) {
    Add(out, x.dst); Add(out, x.lhs); Add(out, x.rhs);
  }
  else if constexpr (std::is_same_v<T, GpGather>) { Add(out, x.dst); Add(out, x.src); Add(out, x.indices); }
  else if constexpr (std::is_same_v<T, GpScatter>) { Add(out, x.dst); Add(out, x.updates); Add(out, x.indices); }
  else if constexpr (std::is_same_v<T, GpArgReduce>) {
    Add(out, x.dst_value); Add(out, x.dst_index); Add(out, x.src_value); Add(out, x.src_index);
  }
  else if constexpr (std::is_same_v<T, GpSort>) { Add(out, x.dsts); Add(out, x.srcs); }
  else if constexpr (std::is_same_v<T, GpReduceWindow>) { Add(out, x.dst); Add(out, x.src); }
  else if constexpr (std::is_same_v<T, GpSelectAndScatter>) { Add(out, x.dst); Add(out, x.operand); Add(out, x.source); }
  else if constexpr (std::is_same_v<T, Collective>) { Add(out, x.dst); Add(out, x.src); }
  else if constexpr (std::is_same_v<T, PartitionId>) { Add(out, x.dst); }
  else if constexpr (std::is_same_v<T, HostCallback>) { Add(out, x.dsts); Add(out, x.srcs); }
  else if constexpr (std::is_same_v<T, GpRegionReduce> || std::is_same_v<T, GpRegionReduceWindow>) {
    Add(out, x.dsts); Add(out, x.srcs); Add(out, x.inits);
  }
  else if constexpr (std::is_same_v<T, GpRegionScatter>) { Add(out, x.dsts); Add(out, x.updates); Add(out, x.indices); }
  else if constexpr (std::is_same_v<T, GpRegionSort>) { Add(out, x.dsts); Add(out, x.srcs); }
  else {
    static_assert(std::is_same_v<T, Matmul> || std::is_same_v<T, Transpose> || std::is_same_v<T, TensorTensor> ||
                      std::is_same_v<T, TensorScalar> || std::is_same_v<T, TensorReduce> || std::is_same_v<T, TensorCopy> ||
                      std::is_same_v<T, TensorTernary> || std::is_same_v<T, TensorUnary> || std::is_same_v<T, ScalarTensorTensor> ||
                      std::is_same_v<T, BnStats> || std::is_same_v<T, BnAggr> || std::is_same_v<T, Activation> ||
                      std::is_same_v<T, ActivationReduce> ||
                      std::is_same_v<T, GpBitcast> || std::is_same_v<T, Iota> || std::is_same_v<T, AffineSelect>,
                  "an operand struct with HBM access patterns must list them here");
  }
}

void AddTile(std::vector<TileAP*>& out, TileAP& ap) { out.push_back(&ap); }
void AddTile(std::vector<TileAP*>& out, Endpoint& e) {
  if (e.is_tile) out.push_back(&e.tile);
}
void AddTile(std::vector<TileAP*>& out, ScalarOperand& s) {
  if (s.is_tile) out.push_back(&s.tile);
}

// Each operand struct's tile access patterns in the order the format encodes them.
template <typename T>
void CollectTiles(std::vector<TileAP*>& out, T& x) {
  if constexpr (std::is_same_v<T, DmaCopy>) { AddTile(out, x.dst); AddTile(out, x.src); }
  else if constexpr (std::is_same_v<T, Matmul>) { AddTile(out, x.dst); AddTile(out, x.stationary); AddTile(out, x.moving); }
  else if constexpr (std::is_same_v<T, Transpose> || std::is_same_v<T, TensorReduce> || std::is_same_v<T, TensorCopy> ||
                     std::is_same_v<T, TensorUnary> || std::is_same_v<T, AffineSelect>) {
    AddTile(out, x.dst); AddTile(out, x.src);
  }
  else if constexpr (std::is_same_v<T, TensorTensor>) { AddTile(out, x.dst); AddTile(out, x.a); AddTile(out, x.b); }
  else if constexpr (std::is_same_v<T, TensorTernary>) {
    AddTile(out, x.dst); AddTile(out, x.a); AddTile(out, x.b); AddTile(out, x.c);
  }
  else if constexpr (std::is_same_v<T, TensorScalar>) { AddTile(out, x.dst); AddTile(out, x.src); AddTile(out, x.scalar); }
  else if constexpr (std::is_same_v<T, Activation>) { AddTile(out, x.dst); AddTile(out, x.src); AddTile(out, x.bias); }
  else if constexpr (std::is_same_v<T, ActivationReduce>) {
    AddTile(out, x.dst); AddTile(out, x.src); AddTile(out, x.scale); AddTile(out, x.bias);
    if (x.has_sum()) AddTile(out, x.dst_sum);
  }
  else if constexpr (std::is_same_v<T, Iota>) { AddTile(out, x.dst); }
  // Every other opcode addresses HBM only.
}

}  // namespace

std::vector<TileAP*> TileOperands(Operands& operands) {
  std::vector<TileAP*> out;
  std::visit([&](auto& x) { CollectTiles(out, x); }, operands);
  return out;
}

void MoveTile(TileAP& tile, const TileStep& step, int64_t turns) {
  const int64_t moved = step.step * turns;
  if (step.field == TileField::kByteOffset) {
    tile.byte_offset = static_cast<uint32_t>(tile.byte_offset + moved);
  } else {
    tile.partition_start = static_cast<uint16_t>(tile.partition_start + moved);
  }
}

std::vector<HbmAP*> HbmOperands(Operands& operands) {
  std::vector<HbmAP*> out;
  std::visit([&](auto& x) { Collect(out, x); }, operands);
  return out;
}

int64_t Block::ExecutedCount(int s) const {
  // A loop runs its body (its length plus what its own nested loops add: `extra`) `count`
  // times, `extra` + (length + extra)·(count − 1) more than its stored instructions; loops are
  // sorted with parents first, so walk them backwards (children first).
  const std::vector<StreamLoop>& list = loops[s];
  std::vector<int64_t> extra(list.size(), 0);
  int64_t total = static_cast<int64_t>(streams[s].size());
  for (size_t l = list.size(); l-- > 0;) {
    int64_t runs;
    if (__builtin_add_overflow(extra[l], static_cast<int64_t>(list[l].length), &runs) ||
        __builtin_mul_overflow(runs, static_cast<int64_t>(list[l].count) - 1, &runs) ||
        __builtin_add_overflow(runs, extra[l], &runs)) {
      runs = INT64_MAX;
    }
    int64_t& into = list[l].parent >= 0 ? extra[list[l].parent] : total;
    if (__builtin_add_overflow(into, runs, &into)) into = INT64_MAX;
  }
  return total;
}

std::vector<int> Block::EnclosingLoops(int s, size_t index) const {
  std::vector<int> chain;
  const std::vector<StreamLoop>& list = loops[s];
  for (size_t l = 0; l < list.size() && list[l].first <= index; ++l) {
    if (index < list[l].first + list[l].length) chain.push_back(static_cast<int>(l));
  }
  return chain;  // containing loops nest, and parents come first
}

Instruction Block::AtRun(int s, size_t index, int64_t run) const {
  const std::vector<int> chain = EnclosingLoops(s, index);
  Instruction out = streams[s][index];
  for (size_t d = chain.size(); d-- > 0;) {  // innermost first: its counter is the lowest digit
    const StreamLoop& loop = loops[s][chain[d]];
    const int64_t iteration = run % loop.count;
    run /= loop.count;
    if (iteration > 0) out = AtIteration(out, loop.body[index - loop.first], iteration);
  }
  return out;
}

Instruction AtIteration(const Instruction& inst, const InstructionSteps& steps, int64_t iteration) {
  Instruction out = inst;
  for (size_t k = 0; k < out.waits.size(); ++k) {
    out.waits[k].count = static_cast<uint32_t>(out.waits[k].count + steps.wait_steps[k] * iteration);
  }
  if (!steps.hbm_steps.empty()) {
    const std::vector<HbmAP*> hbm = HbmOperands(out.operands);
    for (const auto& [index, step] : steps.hbm_steps) hbm[index]->offset += step * iteration;
  }
  if (!steps.tile_steps.empty()) {
    const std::vector<TileAP*> tiles = TileOperands(out.operands);
    for (const TileStep& step : steps.tile_steps) MoveTile(*tiles[step.operand], step, step.Turns(iteration));
  }
  if (steps.base_step != 0) {
    if (auto* iota = std::get_if<Iota>(&out.operands)) iota->base += steps.base_step * iteration;
    if (auto* select = std::get_if<AffineSelect>(&out.operands)) select->base += steps.base_step * iteration;
  }
  return out;
}

}  // namespace trn::sim
