// TensorE: the 128x128 systolic array. matmul contracts over the partition dimension
// (stationary [K, M], moving [K, N] -> PSUM [M, N]) accumulating in fp32; transpose moves a
// [P, F] tile to [F, P] in PSUM.
#include "engines.h"

namespace trn::sim {

void RunMatmul(Machine& machine, const Matmul& matmul) {
  const int64_t k_size = matmul.stationary.partition_count;
  const int64_t m_size = matmul.stationary.free_size();
  const int64_t n_size = matmul.moving.free_size();
  const Values stationary = Gather(machine.View(matmul.stationary), Domain::kF32);
  const Values moving = Gather(machine.View(matmul.moving), Domain::kF32);
  const StridedView dst = machine.View(matmul.dst);
  Values acc = matmul.start ? Values::Make(Domain::kF32, m_size * n_size) : Gather(dst, Domain::kF32);
  const float* s = stationary.f32.data();
  const float* v = moving.f32.data();
  // Row by row of the output, k in order: each output element sums its products in k order in
  // fp32 (the inner loop over n vectorises without reassociating anything).
  for (int64_t m = 0; m < m_size; ++m) {
    float* out = acc.f32.data() + m * n_size;
    for (int64_t k = 0; k < k_size; ++k) {
      const float w = s[k * m_size + m];
      const float* row = v + k * n_size;
      for (int64_t n = 0; n < n_size; ++n) out[n] += w * row[n];
    }
  }
  Scatter(acc, dst);
}

void RunTranspose(Machine& machine, const Transpose& transpose) {
  const StridedView src = machine.View(transpose.src);
  const int64_t rows = transpose.src.partition_count, cols = transpose.src.free_size();
  const Values in = Gather(src, ComputeDomain(src.dtype));
  Values out = Values::Make(in.domain, in.size());
  WithDomainType(in.domain, [&](auto tag) {
    using T = decltype(tag);
    const T* i = in.data<T>();
    T* o = out.data<T>();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) o[c * rows + r] = i[r * cols + c];
    }
  });
  Scatter(out, machine.View(transpose.dst));
}

}  // namespace trn::sim
