// VectorE: elementwise ALU ops over tiles (partition-parallel), per-partition scalars,
// free-axis reductions, and copies (the way out of PSUM).
#include "elementwise.h"
#include "engines.h"

namespace trn::sim {
namespace {

void RunTensorScalar(Machine& machine, const TensorScalar& t) {
  const Domain domain = ComputeDomain(t.src.dtype);
  Values x = Gather(machine.View(t.src), domain);
  Values s = t.scalar.is_tile
                 ? RepeatEach(Gather(machine.View(t.scalar.tile), domain), t.src.free_size())
                 : ScalarValues(t.scalar.immediate, domain, x.size());
  if (t.reverse) {
    ApplyBinary(t.op, t.src.dtype, s, x);
    Scatter(s, machine.View(t.dst));
  } else {
    ApplyBinary(t.op, t.src.dtype, x, s);
    Scatter(x, machine.View(t.dst));
  }
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
      Scatter(ComputeElementwise(t.op, {machine.View(t.a), machine.View(t.b)}), machine.View(t.dst));
      return;
    }
    case Opcode::kTensorScalar:
      return RunTensorScalar(machine, std::get<TensorScalar>(inst.operands));
    case Opcode::kTensorReduce:
      return RunTensorReduce(machine, std::get<TensorReduce>(inst.operands));
    case Opcode::kTensorCopy: {
      const auto& t = std::get<TensorCopy>(inst.operands);
      Scatter(ComputeElementwise(AluOp::kCopy, {machine.View(t.src)}), machine.View(t.dst));
      return;
    }
    case Opcode::kTensorTernary: {
      const auto& t = std::get<TensorTernary>(inst.operands);
      Scatter(ComputeElementwise(t.op, {machine.View(t.a), machine.View(t.b), machine.View(t.c)}), machine.View(t.dst));
      return;
    }
    case Opcode::kTensorUnary: {
      const auto& t = std::get<TensorUnary>(inst.operands);
      Scatter(ComputeElementwise(t.op, {machine.View(t.src)}), machine.View(t.dst));
      return;
    }
    default:
      return;  // the loader puts only VectorE opcodes on the DVE stream
  }
}

}  // namespace trn::sim
