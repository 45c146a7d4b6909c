// VectorE: elementwise ALU ops over tiles (partition-parallel), per-partition scalars,
// free-axis reductions, and copies (the way out of PSUM).
#include "elementwise.h"
#include "engines.h"

namespace trn::sim {
namespace {

void RunTensorScalar(Machine& machine, const TensorScalar& t) {
  const Domain domain = ComputeDomain(t.src.dtype);
  const StridedView src = machine.View(t.src), dst = machine.View(t.dst);
  const int64_t total = dst.num_elements();
  // The scalars are read whole before anything is written, so only src decides the chunking.
  const Values per_row = t.scalar.is_tile ? Gather(machine.View(t.scalar.tile), domain)
                                          : ScalarValues(t.scalar.immediate, domain, 1);
  const int64_t row_length = t.scalar.is_tile ? t.src.free_size() : total;
  if (InPlaceRows(dst, {src})) {
    WithDomainType(domain, [&](auto tag) {
      using T = decltype(tag);
      ForEachInPlaceRow(dst, {src}, [&](uint8_t* out, const std::array<const uint8_t*, 3>& in,
                                        int64_t n, int64_t row) {
        // The row's scalar repeated: a row lies within one partition, so it has one.
        thread_local ValueArray<T> splat;
        splat.assign(n, per_row.data<T>()[row * n / row_length]);
        const T* x = reinterpret_cast<const T*>(in[0]);
        ApplyBinaryTo(t.op, t.src.dtype, reinterpret_cast<T*>(out), t.reverse ? splat.data() : x,
                      t.reverse ? x : splat.data(), n);
      });
    });
    return;
  }
  ForEachChunk(total, CanChunk(dst, {src}), [&](int64_t first, int64_t n) {
    Values x = Values::Uninitialized(domain, n);
    GatherRange(src, first, x);
    Values s = RepeatEach(per_row, row_length, first, n);
    Values& result = t.reverse ? s : x;
    ApplyBinary(t.op, t.src.dtype, result, t.reverse ? x : s);
    ScatterRange(result, dst, first);
  });
}

// (data op0 s) op1 operand1 in data's compute domain: the intermediate is not rounded to a tile
// dtype, so it equals tensor_scalar then tensor_tensor where that intermediate tile is fp32.
void RunScalarTensorTensor(Machine& machine, const ScalarTensorTensor& t) {
  const Domain domain = ComputeDomain(t.data.dtype);
  const StridedView data = machine.View(t.data), other = machine.View(t.operand1);
  const StridedView dst = machine.View(t.dst);
  const int64_t total = dst.num_elements();
  const Values per_row = t.operand0.is_tile ? Gather(machine.View(t.operand0.tile), domain)
                                            : ScalarValues(t.operand0.immediate, domain, 1);
  const int64_t row_length = t.operand0.is_tile ? t.data.free_size() : total;
  ForEachChunk(total, CanChunk(dst, {data, other}), [&](int64_t first, int64_t n) {
    Values x = Values::Uninitialized(domain, n);
    GatherRange(data, first, x);
    Values s = RepeatEach(per_row, row_length, first, n);
    Values& scaled = t.reverse0 ? s : x;
    ApplyBinary(t.op0, t.data.dtype, scaled, t.reverse0 ? x : s);
    Values y = Values::Uninitialized(domain, n);
    GatherRange(other, first, y);
    Values& result = t.reverse1 ? y : scaled;
    ApplyBinary(t.op1, t.data.dtype, result, t.reverse1 ? scaled : y);
    ScatterRange(result, dst, first);
  });
}

void RunTensorReduce(Machine& machine, const TensorReduce& t) {
  const Values x = Gather(machine.View(t.src), ComputeDomain(t.src.dtype));
  Scatter(ReduceRows(t.op, x, t.src.partition_count, t.src.free_size(), nullptr), machine.View(t.dst));
}

// bn_stats: per partition, the elements at even and at odd free positions, each as (count,
// mean, Σ (x - mean)²) in fp32: the sum folded from the first element in order, divided by the
// count, then the centred squares folded the same way (an empty half is (0, 0, 0)).
void RunBnStats(Machine& machine, const BnStats& t) {
  const Values x = Gather(machine.View(t.src), Domain::kF32);
  const int64_t rows = t.src.partition_count, cols = t.src.free_size();
  Values out = Values::Uninitialized(Domain::kF32, rows * 6);
  const float* in = x.data<float>();
  float* o = out.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t parity = 0; parity < 2; ++parity) {
      float sum = 0, count = 0;
      for (int64_t c = parity; c < cols; c += 2) sum += in[r * cols + c], count += 1;
      const float mean = count > 0 ? sum / count : 0.0f;
      float squares = 0;
      for (int64_t c = parity; c < cols; c += 2) {
        const float d = in[r * cols + c] - mean;
        squares += d * d;
      }
      float* tuple = o + r * 6 + parity * 3;
      tuple[0] = count, tuple[1] = mean, tuple[2] = squares;
    }
  }
  Scatter(out, machine.View(t.dst));
}

// bn_aggr: the (count, mean, M2) tuples of each partition combined in order (Chan et al.'s
// pairwise update, fp32; tuples of count 0 skipped), then (mean, M2 / count); (0, 0) when every
// count is 0.
void RunBnAggr(Machine& machine, const BnAggr& t) {
  const Values x = Gather(machine.View(t.src), Domain::kF32);
  const int64_t rows = t.src.partition_count, cols = t.src.free_size();
  Values out = Values::Uninitialized(Domain::kF32, rows * 2);
  const float* in = x.data<float>();
  float* o = out.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    float count = 0, mean = 0, m2 = 0;
    for (int64_t c = 0; c < cols; c += 3) {
      const float* tuple = in + r * cols + c;
      const float n = tuple[0];
      if (!(n > 0)) continue;
      const float total = count + n;
      const float delta = tuple[1] - mean;
      mean = mean + delta * (n / total);
      m2 = m2 + tuple[2] + delta * delta * (count * n / total);
      count = total;
    }
    o[r * 2] = mean;
    o[r * 2 + 1] = count > 0 ? m2 / count : 0.0f;
  }
  Scatter(out, machine.View(t.dst));
}

}  // namespace

void RunVectorInstruction(Machine& machine, const Instruction& inst) {
  switch (inst.opcode) {
    case Opcode::kTensorTensor: {
      const auto& t = std::get<TensorTensor>(inst.operands);
      RunElementwise(t.op, machine.View(t.dst), {machine.View(t.a), machine.View(t.b)});
      return;
    }
    case Opcode::kTensorScalar:
      return RunTensorScalar(machine, std::get<TensorScalar>(inst.operands));
    case Opcode::kScalarTensorTensor:
      return RunScalarTensorTensor(machine, std::get<ScalarTensorTensor>(inst.operands));
    case Opcode::kBnStats:
      return RunBnStats(machine, std::get<BnStats>(inst.operands));
    case Opcode::kBnAggr:
      return RunBnAggr(machine, std::get<BnAggr>(inst.operands));
    case Opcode::kTensorReduce:
      return RunTensorReduce(machine, std::get<TensorReduce>(inst.operands));
    case Opcode::kTensorCopy: {
      const auto& t = std::get<TensorCopy>(inst.operands);
      RunCopy(machine.View(t.dst), machine.View(t.src));
      return;
    }
    case Opcode::kTensorTernary: {
      const auto& t = std::get<TensorTernary>(inst.operands);
      RunElementwise(t.op, machine.View(t.dst), {machine.View(t.a), machine.View(t.b), machine.View(t.c)});
      return;
    }
    case Opcode::kTensorUnary: {
      const auto& t = std::get<TensorUnary>(inst.operands);
      RunElementwise(t.op, machine.View(t.dst), {machine.View(t.src)});
      return;
    }
    default:
      return;  // the loader puts only VectorE opcodes on the DVE stream
  }
}

}  // namespace trn::sim
