// TensorE: the 128x128 systolic array. matmul contracts over the partition dimension
// (stationary [K, M], moving [K, N] -> PSUM [M, N]) accumulating in fp32; transpose moves a
// [P, F] tile to [F, P] in PSUM.
#include <cstring>
#include <vector>

#include "engines.h"

namespace trn::sim {
namespace {

// A row-major fp32 matrix: row r starts at data + r * row_stride.
struct Rows {
  float* data;
  int64_t row_stride;
  float* row(int64_t r) const { return data + r * row_stride; }
};

// An operand tile as fp32 rows (one per partition): read in place when it already is contiguous
// fp32 rows in SBUF/PSUM, otherwise gathered (converted) into `storage`.
Rows OperandRows(Machine& machine, const TileAP& ap, Values& storage) {
  if (ap.dtype == DType::kF32 && ap.contiguous()) {
    const StridedView view = machine.View(ap);
    return {reinterpret_cast<float*>(view.base), view.stride_bytes[0] / 4};
  }
  storage = Gather(machine.View(ap), Domain::kF32);
  return {storage.f32.data(), ap.free_size()};
}

// The x86-64 baseline is SSE2; the same loops compiled for AVX2/AVX-512 run 2-4x faster. A
// wider vector changes nothing in the results: each lane does the same IEEE multiply and add
// (-ffp-contract=off holds for every clone), so the ifunc picks only the speed.
#if defined(__x86_64__) && defined(__linux__)
#define TRN_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define TRN_VECTOR_CLONES
#endif

// A kRowBlock x kColBlock block of outputs held in registers across the whole k loop: every
// output element still receives its products one at a time in k order (out += s[k]·v[k],
// k = 0..K-1, each sum rounded to fp32), which is the instruction's definition; the blocking
// only changes which elements are worked on together.
constexpr int64_t kRowBlock = 4;
constexpr int64_t kColBlock = 16;
// kColBlock floats as one GCC/Clang vector: lane j is column n0 + j. The compiler splits it into
// the target's registers (4 SSE, 2 AVX2 or 1 AVX-512), lane by lane, so no lane sees another.
typedef float ColumnBlock __attribute__((vector_size(kColBlock * sizeof(float))));

TRN_VECTOR_CLONES
void MatmulBlocked(const Rows& stationary, const Rows& moving, const Rows& out, int64_t k_size, int64_t m_size,
                   int64_t n_size) {
  const int64_t m_blocked = m_size - m_size % kRowBlock, n_blocked = n_size - n_size % kColBlock;
  // Operand rows sit a power-of-two stride apart (SBUF partitions, gathered rows), so reading one
  // block of every row hits the same cache sets. Copying the blocks the k loop reads next to
  // each other first keeps them in L1: stationary as [m block][k][kRowBlock], moving one
  // [k][kColBlock] panel at a time.
  std::vector<float> weights(m_blocked * k_size), panel(k_size * kColBlock);
  for (int64_t m0 = 0; m0 < m_blocked; m0 += kRowBlock) {
    for (int64_t k = 0; k < k_size; ++k) {
      std::memcpy(&weights[(m0 * k_size) + k * kRowBlock], stationary.row(k) + m0, kRowBlock * sizeof(float));
    }
  }
  for (int64_t n0 = 0; n0 < n_blocked; n0 += kColBlock) {
    for (int64_t k = 0; k < k_size; ++k) {
      std::memcpy(&panel[k * kColBlock], moving.row(k) + n0, kColBlock * sizeof(float));
    }
    for (int64_t m0 = 0; m0 < m_blocked; m0 += kRowBlock) {
      ColumnBlock acc[kRowBlock];
      for (int64_t r = 0; r < kRowBlock; ++r) std::memcpy(&acc[r], out.row(m0 + r) + n0, sizeof(ColumnBlock));
      const float* w = &weights[m0 * k_size];
      for (int64_t k = 0; k < k_size; ++k, w += kRowBlock) {
        ColumnBlock v;
        std::memcpy(&v, &panel[k * kColBlock], sizeof(v));
        for (int64_t r = 0; r < kRowBlock; ++r) acc[r] += w[r] * v;
      }
      for (int64_t r = 0; r < kRowBlock; ++r) std::memcpy(out.row(m0 + r) + n0, &acc[r], sizeof(ColumnBlock));
    }
  }
  // The edges (rows past the last full row block, columns past the last full column block),
  // element by element in the same k order.
  for (int64_t m = 0; m < m_size; ++m) {
    float* o = out.row(m);
    for (int64_t k = 0; k < k_size; ++k) {
      const float w = stationary.row(k)[m];
      const float* v = moving.row(k);
      for (int64_t n = m < m_blocked ? n_blocked : 0; n < n_size; ++n) o[n] += w * v[n];
    }
  }
}

}  // namespace

void RunMatmul(Machine& machine, const Matmul& matmul) {
  const int64_t k_size = matmul.stationary.partition_count;
  const int64_t m_size = matmul.stationary.free_size();
  const int64_t n_size = matmul.moving.free_size();
  // Stationary is small ([K, M]); gathering it makes its rows adjacent for the k loop.
  const Values stationary_values = Gather(machine.View(matmul.stationary), Domain::kF32);
  const Rows stationary{const_cast<float*>(stationary_values.f32.data()), m_size};
  Values moving_storage;
  const Rows moving = OperandRows(machine, matmul.moving, moving_storage);
  // dst is fp32 PSUM and the inputs are SBUF, so accumulating in place cannot alias an input.
  const StridedView dst = machine.View(matmul.dst);
  if (matmul.dst.contiguous()) {
    const Rows out{reinterpret_cast<float*>(dst.base), dst.stride_bytes[0] / 4};
    if (matmul.start) {
      for (int64_t m = 0; m < m_size; ++m) std::memset(out.row(m), 0, n_size * sizeof(float));
    }
    MatmulBlocked(stationary, moving, out, k_size, m_size, n_size);
    return;
  }
  Values acc = matmul.start ? Values::Make(Domain::kF32, m_size * n_size) : Gather(dst, Domain::kF32);
  MatmulBlocked(stationary, moving, Rows{acc.f32.data(), n_size}, k_size, m_size, n_size);
  Scatter(acc, dst);
}

void RunTranspose(Machine& machine, const Transpose& transpose) {
  const StridedView src = machine.View(transpose.src);
  const int64_t rows = transpose.src.partition_count, cols = transpose.src.free_size();
  const Values in = Gather(src, ComputeDomain(src.dtype));
  Values out = Values::Uninitialized(in.domain, in.size());
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
