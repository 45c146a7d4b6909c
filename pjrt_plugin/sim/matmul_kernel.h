// TensorE's arithmetic on the host: a blocked fp32 matmul that keeps the instruction's
// definition (every output element receives its products one at a time in k order, each sum
// rounded to fp32) at any vector width and thread count. The wide kernels fuse the multiply and
// the add only where every product their register blocks form is exact (bf16/fp8-valued operands
// of moderate magnitude), where the single rounding of a fused multiply-add is the same as the
// add's; the edges past the blocks are never fused.
#pragma once

#include <cstdint>

namespace trn::sim {

// A row-major fp32 matrix: row r starts at data + r * row_stride.
struct Rows {
  float* data;
  int64_t row_stride;
  float* row(int64_t r) const { return data + r * row_stride; }
};

// How an operand's elements are stored. bf16 operands are read where they lie and widened
// (exactly) as the kernel packs them, instead of being converted to a second fp32 copy first.
enum class OperandFormat { kF32, kBF16 };

// A row-major matrix of fp32 or bf16 values: row r starts `row_stride` elements after row r - 1.
struct OperandRows {
  const void* data;
  int64_t row_stride;
  OperandFormat format;
};

// out[m][n] += stationary[k][m] * moving[k][n] for k = 0..k_size-1 in order, for every
// m < m_size, n < n_size. out must not alias the operands.
void MatmulAccumulate(const OperandRows& stationary, const OperandRows& moving, const Rows& out,
                      int64_t k_size, int64_t m_size, int64_t n_size);

}  // namespace trn::sim
