// ScalarE: dst = func(src * scale + bias), computed in fp32 whatever the tile dtypes; an
// immediate bias of zero is no addition (signed zeros pass through). activation_reduce's scale
// may be per partition, and it may also sum each row of its result into an fp32 [P, 1] tile:
// the values as written to dst or, as the chip's reduce registers do, before their rounding.
#include <vector>

#include "alu.h"
#include "elementwise.h"
#include "engines.h"

namespace trn::sim {
namespace {

// One value per partition of a [P, 1] tile operand, or the immediate.
Values OperandValues(Machine& machine, const ScalarOperand& s) {
  return s.is_tile ? Gather(machine.View(s.tile), Domain::kF32) : ScalarValues(s.immediate, Domain::kF32, 1);
}

// func(src · scale + bias) into dst, views of equal element counts whose rows (partitions) hold
// free_size elements each.
void Activate(Machine& machine, AluOp func, const StridedView& dst, const StridedView& src,
              int64_t free_size, const ScalarOperand& scale_operand,
              const ScalarOperand& bias_operand) {
  const int64_t total = dst.num_elements();
  // Per-partition operands are read whole before anything is written, so only src decides the
  // chunking.
  const Values scale = OperandValues(machine, scale_operand), bias = OperandValues(machine, bias_operand);
  const bool per_partition = scale_operand.is_tile || bias_operand.is_tile;
  const int64_t row_length = per_partition ? free_size : total;
  if (InPlaceRows(dst, {src})) {  // fp32 to fp32: computed in the tiles themselves
    ForEachInPlaceRow(dst, {src}, [&](uint8_t* out, const std::array<const uint8_t*, 3>& in,
                                      int64_t n, int64_t row) {
      const int64_t partition = row * n / row_length;  // a row lies within one partition
      const float s = scale.f32[scale_operand.is_tile ? partition : 0];
      const float* x = reinterpret_cast<const float*>(in[0]);
      float* v = reinterpret_cast<float*>(out);
      if (bias_operand.is_tile || bias.f32[0] != 0.0f) {
        const float b = bias.f32[bias_operand.is_tile ? partition : 0];
        for (int64_t i = 0; i < n; ++i) v[i] = x[i] * s + b;
      } else {
        for (int64_t i = 0; i < n; ++i) v[i] = x[i] * s;  // as below: -0 stays -0
      }
      ApplyUnaryTo(func, DType::kF32, v, v, n);
    });
    return;
  }
  ForEachChunk(total, CanChunk(dst, {src}), [&](int64_t first, int64_t n) {
    Values x = Values::Uninitialized(Domain::kF32, n);
    GatherRange(src, first, x);
    float* v = x.f32.data();
    const Values s = scale_operand.is_tile ? RepeatEach(scale, row_length, first, n) : scale;
    const int64_t s_step = scale_operand.is_tile ? 1 : 0;
    if (bias_operand.is_tile) {
      const Values b = RepeatEach(bias, row_length, first, n);
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] * s.f32[i * s_step] + b.f32[i];
    } else if (bias.f32[0] != 0.0f) {
      const float b = bias.f32[0];
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] * s.f32[i * s_step] + b;
    } else {
      // A zero bias adds nothing: x + 0 would turn -0 into +0 (sqrt(-0) must stay -0).
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] * s.f32[i * s_step];
    }
    ApplyUnary(func, DType::kF32, x);
    ScatterRange(x, dst, first);
  });
}

}  // namespace

void RunActivation(Machine& machine, const Activation& a) {
  ScalarOperand scale{};
  scale.immediate = Scalar{DType::kF32, a.scale, 0};
  Activate(machine, a.func, machine.View(a.dst), machine.View(a.src), a.src.free_size(), scale,
           a.bias);
}

void RunActivationReduce(Machine& machine, const ActivationReduce& a) {
  const StridedView dst = machine.View(a.dst), src = machine.View(a.src);
  const int64_t rows = a.dst.partition_count, row_length = a.dst.free_size();
  if (a.sum_of == RowSum::kActivated && a.dst.dtype != DType::kF32) {
    // The fp32 activated values go through a row-major scratch tile: summed as they are, then
    // rounded into dst.
    std::vector<float> activated(static_cast<size_t>(rows * row_length));
    StridedView scratch;
    scratch.base = reinterpret_cast<uint8_t*>(activated.data());
    scratch.dtype = DType::kF32;
    scratch.rank = 2;
    scratch.count[0] = rows;
    scratch.count[1] = row_length;
    scratch.stride_bytes[0] = row_length * static_cast<int64_t>(sizeof(float));
    scratch.stride_bytes[1] = sizeof(float);
    Activate(machine, a.func, scratch, src, a.src.free_size(), a.scale, a.bias);
    const Values values = Gather(scratch, Domain::kF32);
    Scatter(values, dst);
    Scatter(ReduceRows(AluOp::kAdd, values, rows, row_length, nullptr), machine.View(a.dst_sum));
    return;
  }
  Activate(machine, a.func, dst, src, a.src.free_size(), a.scale, a.bias);
  if (!a.has_sum()) return;
  // Summing dst as written (rounded to its dtype) folds it as tensor_reduce add does, so a fused
  // exp-and-sum has the bits of the activation followed by the reduce. An fp32 dst is the
  // activated values themselves.
  Scatter(ReduceRows(AluOp::kAdd, Gather(dst, Domain::kF32), rows, row_length, nullptr),
          machine.View(a.dst_sum));
}

}  // namespace trn::sim
