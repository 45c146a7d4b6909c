#include "matmul_kernel.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "host_parallel.h"

namespace trn::sim {
namespace {

// A register block: kRows output rows x kColVectors vectors of one ISA's width, held in
// registers across the whole k loop. 4 x 2 accumulators plus 2 operand vectors and a broadcast
// fit the 16 registers of SSE2 and AVX2; AVX-512's 32 hold 8 x 2 (16 independent add chains,
// which a fused multiply-add's throughput needs). The blocking only chooses which elements are
// worked on together: each lane does the same IEEE multiply and add (-ffp-contract=off) as the
// scalar edge loop.
constexpr int64_t kRowBlock = 4;
constexpr int64_t kWideRowBlock = 8;
constexpr int64_t kColVectors = 2;

template <int kLanes>
struct FloatVector {
  typedef float Type __attribute__((vector_size(kLanes * sizeof(float))));
};

// The columns [n_begin, n_end) (whole panels of kLanes * kColVectors) of the first m_blocked
// rows. `weights` is stationary packed as [m block][k][kRows]. Inlined into one function
// per ISA below, so the vector type always matches the target's registers: a vector wider than
// the target's is split by the compiler through the stack, which on AVX2 hosts spilled the
// accumulators on every k step.
template <int kLanes, int64_t kRows>
[[gnu::always_inline]] inline void MatmulPanels(const float* weights, const Rows& moving, const Rows& out,
                                                int64_t k_size, int64_t m_blocked, int64_t n_begin, int64_t n_end) {
  using Vector = typename FloatVector<kLanes>::Type;
  constexpr int64_t kWidth = kLanes * kColVectors;
  // Operand rows sit a power-of-two stride apart (SBUF partitions, gathered rows), so reading one
  // panel of every row hits the same cache sets: the panel is copied to adjacent [k][kWidth]
  // first, and stays in L1 while every row block uses it.
  std::vector<float> panel(k_size * kWidth);
  for (int64_t n0 = n_begin; n0 < n_end; n0 += kWidth) {
    for (int64_t k = 0; k < k_size; ++k) {
      std::memcpy(&panel[k * kWidth], moving.row(k) + n0, kWidth * sizeof(float));
    }
    for (int64_t m0 = 0; m0 < m_blocked; m0 += kRows) {
      Vector acc[kRows][kColVectors];
      for (int64_t r = 0; r < kRows; ++r) {
        for (int64_t c = 0; c < kColVectors; ++c) {
          std::memcpy(&acc[r][c], out.row(m0 + r) + n0 + c * kLanes, sizeof(Vector));
        }
      }
      const float* w = weights + m0 * k_size;
      const float* v = panel.data();
      for (int64_t k = 0; k < k_size; ++k, w += kRows, v += kWidth) {
        Vector x[kColVectors];
        for (int64_t c = 0; c < kColVectors; ++c) std::memcpy(&x[c], v + c * kLanes, sizeof(Vector));
        for (int64_t r = 0; r < kRows; ++r) {
          for (int64_t c = 0; c < kColVectors; ++c) acc[r][c] += w[r] * x[c];
        }
      }
      for (int64_t r = 0; r < kRows; ++r) {
        for (int64_t c = 0; c < kColVectors; ++c) {
          std::memcpy(out.row(m0 + r) + n0 + c * kLanes, &acc[r][c], sizeof(Vector));
        }
      }
    }
  }
}

using PanelFunction = void (*)(const float*, const Rows&, const Rows&, int64_t, int64_t, int64_t, int64_t);

// A kernel and the rows of its register block (the stationary operand is packed for it).
struct PanelKernel {
  PanelFunction run;
  int64_t rows;
};

void Panels128(const float* w, const Rows& moving, const Rows& out, int64_t k, int64_t m, int64_t n0, int64_t n1) {
  MatmulPanels<4, kRowBlock>(w, moving, out, k, m, n0, n1);
}

// The Fused kernels are the same loops compiled with contraction: each acc + w * x may become one
// fused multiply-add. Only called where every product is exact (ProductsAreExact), so fused or
// not, every sum rounds the same.
#define TRN_FUSED [[gnu::optimize("fp-contract=fast")]]

#if defined(__x86_64__)
[[gnu::target("avx2")]] void Panels256(const float* w, const Rows& moving, const Rows& out, int64_t k, int64_t m,
                                       int64_t n0, int64_t n1) {
  MatmulPanels<8, kRowBlock>(w, moving, out, k, m, n0, n1);
}

[[gnu::target("avx2,fma")]] TRN_FUSED void FusedPanels256(const float* w, const Rows& moving, const Rows& out,
                                                          int64_t k, int64_t m, int64_t n0, int64_t n1) {
  MatmulPanels<8, kRowBlock>(w, moving, out, k, m, n0, n1);
}

[[gnu::target("avx512f")]] void Panels512(const float* w, const Rows& moving, const Rows& out, int64_t k,
                                          int64_t m, int64_t n0, int64_t n1) {
  MatmulPanels<16, kWideRowBlock>(w, moving, out, k, m, n0, n1);
}

[[gnu::target("avx512f")]] TRN_FUSED void FusedPanels512(const float* w, const Rows& moving, const Rows& out,
                                                         int64_t k, int64_t m, int64_t n0, int64_t n1) {
  MatmulPanels<16, kWideRowBlock>(w, moving, out, k, m, n0, n1);
}
#endif

int HostVectorBits() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return 512;
  if (__builtin_cpu_supports("avx2")) return 256;
#endif
  return 128;
}

int VectorBitsFromEnvironment() {
  int bits = HostVectorBits();
  if (const char* env = std::getenv("TRN_SIM_VECTOR_BITS"); env != nullptr && *env != '\0') {
    const int cap = std::atoi(env);
    while (bits > 128 && bits > cap) bits /= 2;
  }
  return bits;
}

bool HostHasFma() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

// The kernel of a vector width; `fused` picks the fused multiply-add one (none at 128 bits: the
// SSE2 kernel is the reference every width is checked against).
PanelKernel KernelFor(int bits, bool fused) {
#if defined(__x86_64__)
  static const bool has_fma = HostHasFma();
  if (bits == 512) return {fused ? FusedPanels512 : Panels512, kWideRowBlock};
  if (bits == 256) return {fused && has_fma ? FusedPanels256 : Panels256, kRowBlock};
#endif
  (void)fused;
  return {Panels128, kRowBlock};
}

// Whether every value of the rows x columns is 0 or a normal float of at most bf16's 8
// significant bits (the low 16 bits of its pattern are 0: every bf16 and fp8 value is) with
// magnitude in [2^-63, 2^64). Branch-free within a row, so it vectorizes at any width; inlined
// into one function per ISA below (integer logic: every width gives the same answer).
[[gnu::always_inline]] inline bool NarrowAndModerateRows(const float* data, int64_t row_stride,
                                                         int64_t rows, int64_t columns) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = data + r * row_stride;
    int32_t refused = 0;
    for (int64_t c = 0; c < columns; ++c) {
      int32_t bits;
      std::memcpy(&bits, row + c, 4);
      const int32_t magnitude = bits & 0x7fffffff, exponent = magnitude >> 23;  // biased by 127
      refused |= (bits & 0xffff) | ((magnitude != 0) & ((exponent < 127 - 63) | (exponent > 127 + 63)));
    }
    if (refused != 0) return false;
  }
  return true;
}

using NarrowCheck = bool (*)(const float*, int64_t, int64_t, int64_t);

bool NarrowAndModerate128(const float* data, int64_t row_stride, int64_t rows, int64_t columns) {
  return NarrowAndModerateRows(data, row_stride, rows, columns);
}

#if defined(__x86_64__)
[[gnu::target("avx2")]] bool NarrowAndModerate256(const float* data, int64_t row_stride,
                                                  int64_t rows, int64_t columns) {
  return NarrowAndModerateRows(data, row_stride, rows, columns);
}

[[gnu::target("avx512f")]] bool NarrowAndModerate512(const float* data, int64_t row_stride,
                                                     int64_t rows, int64_t columns) {
  return NarrowAndModerateRows(data, row_stride, rows, columns);
}
#endif

NarrowCheck NarrowCheckFor(int bits) {
#if defined(__x86_64__)
  if (bits == 512) return NarrowAndModerate512;
  if (bits == 256) return NarrowAndModerate256;
#endif
  (void)bits;
  return NarrowAndModerate128;
}

// Whether every product stationary[k][m] * moving[k][n] is exact in fp32: each has at most 16
// significant bits and a magnitude in [2^-126, 2^128), fp32's normal range (NarrowAndModerate
// of both operands). Then a multiply rounds nothing, and a fused multiply-add, rounding
// (product + acc) once, gives the bits a multiply then an add gives.
bool ProductsAreExact(int bits, const Rows& stationary, const Rows& moving, int64_t k_size,
                      int64_t m_size, int64_t n_size) {
  const NarrowCheck narrow_and_moderate = NarrowCheckFor(bits);
  return narrow_and_moderate(stationary.data, stationary.row_stride, k_size, m_size) &&
         narrow_and_moderate(moving.data, moving.row_stride, k_size, n_size);
}

// Below this many multiply-adds a matmul stays on one thread (a hand-off costs microseconds).
constexpr int64_t kParallelMacs = int64_t{1} << 20;

}  // namespace

int MatmulVectorBits() {
  static const int bits = VectorBitsFromEnvironment();
  return bits;
}

void MatmulAccumulate(const Rows& stationary, const Rows& moving, const Rows& out, int64_t k_size, int64_t m_size,
                      int64_t n_size) {
  const int bits = MatmulVectorBits();
  const int64_t width = bits / 32 * kColVectors;
  const bool fused =
      bits > 128 && ProductsAreExact(bits, stationary, moving, k_size, m_size, n_size);
  const PanelKernel kernel = KernelFor(bits, fused);
  const int64_t rows = kernel.rows;
  const int64_t m_blocked = m_size - m_size % rows, n_blocked = n_size - n_size % width;
  std::vector<float> weights(m_blocked * k_size);
  for (int64_t m0 = 0; m0 < m_blocked; m0 += rows) {
    for (int64_t k = 0; k < k_size; ++k) {
      std::memcpy(&weights[(m0 * k_size) + k * rows], stationary.row(k) + m0, rows * sizeof(float));
    }
  }
  // Panels write disjoint columns of out, so they split across threads with no effect on the
  // result.
  const int64_t panels = m_blocked > 0 ? n_blocked / width : 0;
  const auto run = [&](int64_t begin, int64_t end) {
    kernel.run(weights.data(), moving, out, k_size, m_blocked, begin * width, end * width);
  };
  if (m_blocked * n_blocked * k_size >= kParallelMacs) {
    ParallelFor(panels, run);
  } else {
    run(0, panels);
  }
  // The edges (rows past the last full row block, columns past the last full panel), element
  // by element in the same k order.
  for (int64_t m = 0; m < m_size; ++m) {
    float* o = out.row(m);
    for (int64_t k = 0; k < k_size; ++k) {
      const float w = stationary.row(k)[m];
      const float* v = moving.row(k);
      for (int64_t n = m < m_blocked ? n_blocked : 0; n < n_size; ++n) o[n] += w * v[n];
    }
  }
}

}  // namespace trn::sim
