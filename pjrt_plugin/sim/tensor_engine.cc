// TensorE: the 128x128 systolic array. matmul contracts over the partition dimension
// (stationary [K, M], moving [K, N] -> PSUM [M, N]) accumulating in fp32; transpose moves a
// [P, F] tile to [F, P] in PSUM.
#include <cstdint>
#include <cstring>
#include <vector>

#include "engines.h"
#include "matmul_kernel.h"

namespace trn::sim {
namespace {

// An operand tile as rows: read in place when it is contiguous fp32 or bf16 rows in SBUF/PSUM
// (the kernel widens bf16 as it packs), otherwise gathered (converted) to fp32 in `storage`.
OperandRows ReadOperand(Machine& machine, const TileAP& ap, Values& storage) {
  if ((ap.dtype == DType::kF32 || ap.dtype == DType::kBF16) && ap.contiguous()) {
    const StridedView view = machine.View(ap);
    const int64_t size = DTypeSize(ap.dtype);
    if (reinterpret_cast<uintptr_t>(view.base) % size == 0 && view.stride_bytes[0] % size == 0) {
      const OperandFormat format =
          ap.dtype == DType::kF32 ? OperandFormat::kF32 : OperandFormat::kBF16;
      return {view.base, view.stride_bytes[0] / size, format};
    }
  }
  storage = Gather(machine.View(ap), Domain::kF32);
  return {storage.f32.data(), ap.free_size(), OperandFormat::kF32};
}

}  // namespace

void RunMatmul(Machine& machine, const Matmul& matmul) {
  const int64_t k_size = matmul.stationary.partition_count;
  const int64_t m_size = matmul.stationary.free_size();
  const int64_t n_size = matmul.moving.free_size();
  Values stationary_storage, moving_storage;
  const OperandRows stationary = ReadOperand(machine, matmul.stationary, stationary_storage);
  const OperandRows moving = ReadOperand(machine, matmul.moving, moving_storage);
  // dst is fp32 PSUM and the inputs are SBUF, so accumulating in place cannot alias an input.
  const StridedView dst = machine.View(matmul.dst);
  if (matmul.dst.contiguous()) {
    const Rows out{reinterpret_cast<float*>(dst.base), dst.stride_bytes[0] / 4};
    if (matmul.start) {
      for (int64_t m = 0; m < m_size; ++m) std::memset(out.row(m), 0, n_size * sizeof(float));
    }
    MatmulAccumulate(stationary, moving, out, k_size, m_size, n_size);
    return;
  }
  Values acc = matmul.start ? Values::Make(Domain::kF32, m_size * n_size) : Gather(dst, Domain::kF32);
  MatmulAccumulate(stationary, moving, Rows{acc.f32.data(), n_size}, k_size, m_size, n_size);
  Scatter(acc, dst);
}

namespace {

// dst[c][r] = move(src[r][c]) over contiguous rows of T. The source rows are staged side by side
// first: rows a partition apart (192 KiB) share a cache set, so reading down a column of the
// tile itself missed on nearly every element.
template <typename T, typename F>
void TransposeRows(const StridedView& dst, const StridedView& src, int64_t rows, int64_t cols,
                   F move) {
  thread_local std::vector<T> staged;
  staged.resize(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(&staged[r * cols], src.base + r * src.stride_bytes[0], cols * sizeof(T));
  }
  for (int64_t c = 0; c < cols; ++c) {
    T* out = reinterpret_cast<T*>(dst.base + c * dst.stride_bytes[0]);
    for (int64_t r = 0; r < rows; ++r) out[r] = move(staged[r * cols + c]);
  }
}

// A transpose between contiguous tiles of one dtype, f32 or bf16, moves the elements without
// the trip through fp32 values: that trip gives every f32 back unchanged, and every bf16 too
// except that a NaN comes back quiet (FloatToBf16). False for anything else.
bool TransposeInPlace(Machine& machine, const Transpose& transpose) {
  const TileAP& from = transpose.src;
  const TileAP& to = transpose.dst;
  if (from.dtype != to.dtype || !from.contiguous() || !to.contiguous()) return false;
  const StridedView src = machine.View(from), dst = machine.View(to);
  if (MayOverlap(dst, src)) return false;
  const int64_t rows = from.partition_count, cols = from.free_size();
  if (to.partition_count != cols || to.free_size() != rows) return false;
  const int64_t size = DTypeSize(from.dtype);
  for (const StridedView* view : {&src, &dst}) {
    if (reinterpret_cast<uintptr_t>(view->base) % size != 0 || view->stride_bytes[0] % size != 0) {
      return false;
    }
  }
  if (from.dtype == DType::kF32) {
    TransposeRows<float>(dst, src, rows, cols, [](float v) { return v; });
    return true;
  }
  if (from.dtype == DType::kBF16) {
    TransposeRows<uint16_t>(dst, src, rows, cols, [](uint16_t b) {
      return static_cast<uint16_t>((b & 0x7fffu) > 0x7f80u ? b | 0x0040u : b);
    });
    return true;
  }
  return false;
}

}  // namespace

void RunTranspose(Machine& machine, const Transpose& transpose) {
  if (TransposeInPlace(machine, transpose)) return;
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
