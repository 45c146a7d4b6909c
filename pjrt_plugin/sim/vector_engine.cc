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
