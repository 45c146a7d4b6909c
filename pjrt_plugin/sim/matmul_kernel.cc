#include "matmul_kernel.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "float_formats.h"
#include "host_parallel.h"
#include "vector_width.h"

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

// out[0..count) = row `row`, columns [column, column + count) of `rows` as fp32 (exact: a bf16
// is the top half of its fp32 pattern). Inlined where it is used, so the widening vectorizes at
// the caller's width.
[[gnu::always_inline]] inline void LoadFloats(const OperandRows& rows, int64_t row, int64_t column,
                                              int64_t count, float* out) {
  const int64_t first = row * rows.row_stride + column;
  if (rows.format == OperandFormat::kF32) {
    std::memcpy(out, static_cast<const float*>(rows.data) + first, count * sizeof(float));
    return;
  }
  const uint16_t* in = static_cast<const uint16_t*>(rows.data) + first;
  for (int64_t i = 0; i < count; ++i) {
    uint16_t bits;
    std::memcpy(&bits, in + i, sizeof(bits));
    out[i] = Bf16ToFloat(bits);
  }
}

template <int kLanes>
struct FloatVector {
  typedef float Type __attribute__((vector_size(kLanes * sizeof(float))));
};

// The row blocks [m_begin, m_end) (multiples of kRows) across every panel of kLanes * kColVectors
// columns. `weights` is stationary packed as [m block][k][kRows], `panels` is moving packed as
// [panel][k][kLanes * kColVectors]. Inlined into one function per ISA below, so the vector type
// always matches the target's registers: a vector wider than the target's is split by the
// compiler through the stack, which on AVX2 hosts spilled the accumulators on every k step.
template <int kLanes, int64_t kRows>
[[gnu::always_inline]] inline void MatmulPanels(const float* weights, const float* panels,
                                                const Rows& out, int64_t k_size, int64_t m_begin,
                                                int64_t m_end, int64_t panel_count) {
  using Vector = typename FloatVector<kLanes>::Type;
  constexpr int64_t kWidth = kLanes * kColVectors;
  // One row block across every panel, then the next: out is walked along its rows (rows are a
  // PSUM partition apart, so walking down a column would hit the same cache sets).
  for (int64_t m0 = m_begin; m0 < m_end; m0 += kRows) {
    for (int64_t p = 0; p < panel_count; ++p) {
      const int64_t n0 = p * kWidth;
      Vector acc[kRows][kColVectors];
      for (int64_t r = 0; r < kRows; ++r) {
        for (int64_t c = 0; c < kColVectors; ++c) {
          std::memcpy(&acc[r][c], out.row(m0 + r) + n0 + c * kLanes, sizeof(Vector));
        }
      }
      const float* w = weights + m0 * k_size;
      const float* v = panels + p * k_size * kWidth;
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

using PanelFunction = void (*)(const float*, const float*, const Rows&, int64_t, int64_t, int64_t,
                               int64_t);

// A kernel and the rows of its register block (the stationary operand is packed for it).
struct PanelKernel {
  PanelFunction run;
  int64_t rows;
};

void Panels128(const float* w, const float* panels, const Rows& out, int64_t k,
    int64_t m0, int64_t m1, int64_t panel_count) {
  MatmulPanels<4, kRowBlock>(w, panels, out, k, m0, m1, panel_count);
}

// The Fused kernels are the same loops compiled with contraction: each acc + w * x may become one
// fused multiply-add. Only called where every product is exact (ProductsAreExact), so fused or
// not, every sum rounds the same.
#define TRN_FUSED [[gnu::optimize("fp-contract=fast")]]

#if defined(__x86_64__)
[[gnu::target("avx2")]] void Panels256(const float* w, const float* panels, const Rows& out,
                                       int64_t k, int64_t m0, int64_t m1, int64_t panel_count) {
  MatmulPanels<8, kRowBlock>(w, panels, out, k, m0, m1, panel_count);
}

[[gnu::target("avx2,fma")]] TRN_FUSED void FusedPanels256(const float* w, const float* panels,
                                                          const Rows& out, int64_t k, int64_t m0,
                                                          int64_t m1, int64_t panel_count) {
  MatmulPanels<8, kRowBlock>(w, panels, out, k, m0, m1, panel_count);
}

[[gnu::target("avx512f")]] void Panels512(const float* w, const float* panels, const Rows& out,
                                          int64_t k, int64_t m0, int64_t m1, int64_t panel_count) {
  MatmulPanels<16, kWideRowBlock>(w, panels, out, k, m0, m1, panel_count);
}

[[gnu::target("avx512f")]] TRN_FUSED void FusedPanels512(const float* w, const float* panels,
                                                         const Rows& out, int64_t k, int64_t m0,
                                                         int64_t m1, int64_t panel_count) {
  MatmulPanels<16, kWideRowBlock>(w, panels, out, k, m0, m1, panel_count);
}
#endif

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

// Whether every one of `count` values is 0 or a normal float of at most bf16's 8 significant
// bits (the low 16 bits of its pattern are 0: every bf16 and fp8 value is) with magnitude in
// [2^-63, 2^64). Branch-free, so it vectorizes at any width; inlined into one function per ISA
// below (integer logic: every width gives the same answer).
[[gnu::always_inline]] inline bool NarrowAndModerateValues(const float* data, int64_t count) {
  int32_t refused = 0;
  for (int64_t i = 0; i < count; ++i) {
    int32_t bits;
    std::memcpy(&bits, data + i, 4);
    const int32_t magnitude = bits & 0x7fffffff, exponent = magnitude >> 23;  // biased by 127
    refused |= (bits & 0xffff) | ((magnitude != 0) & ((exponent < 127 - 63) | (exponent > 127 + 63)));
  }
  return refused == 0;
}

using NarrowCheck = bool (*)(const float*, int64_t);

bool NarrowAndModerate128(const float* data, int64_t count) {
  return NarrowAndModerateValues(data, count);
}

#if defined(__x86_64__)
[[gnu::target("avx2")]] bool NarrowAndModerate256(const float* data, int64_t count) {
  return NarrowAndModerateValues(data, count);
}

[[gnu::target("avx512f")]] bool NarrowAndModerate512(const float* data, int64_t count) {
  return NarrowAndModerateValues(data, count);
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

// Whether every product the panel kernel forms, packed_weights[i] * packed_panels[j], is exact in
// fp32: each has at most 16 significant bits and a magnitude in [2^-126, 2^128), fp32's normal
// range (NarrowAndModerate of both). Then a multiply rounds nothing, and a fused multiply-add,
// rounding (product + acc) once, gives the bits a multiply then an add gives. The edges are
// never fused, so their values do not matter. Tested on the packed copies, which are in cache.
bool PanelProductsAreExact(int bits, const std::vector<float>& packed_weights,
                           const std::vector<float>& packed_panels) {
  const NarrowCheck narrow_and_moderate = NarrowCheckFor(bits);
  return narrow_and_moderate(packed_weights.data(), static_cast<int64_t>(packed_weights.size())) &&
         narrow_and_moderate(packed_panels.data(), static_cast<int64_t>(packed_panels.size()));
}

// Below this many multiply-adds a matmul stays on one thread (a hand-off costs microseconds).
constexpr int64_t kParallelMacs = int64_t{1} << 20;

}  // namespace

void MatmulAccumulate(const OperandRows& stationary, const OperandRows& moving, const Rows& out,
                      int64_t k_size, int64_t m_size, int64_t n_size) {
  const int bits = SimVectorBits();
  const int64_t width = bits / 32 * kColVectors;
  const int64_t rows = KernelFor(bits, false).rows;
  const int64_t m_blocked = m_size - m_size % rows, n_blocked = n_size - n_size % width;
  // Kept per thread: allocating these on every instruction cost page faults.
  thread_local std::vector<float> weights, panels;
  const int64_t panel_count = m_blocked > 0 ? n_blocked / width : 0;
  weights.resize(m_blocked * k_size);
  panels.resize(panel_count * k_size * width);
  // Operand rows are an SBUF partition apart, so each is read once from start to end, widened to
  // fp32 if bf16, into the packed copies (stationary as [m block][k][rows], moving as adjacent
  // panels [panel][k][width]): reading one panel of every row in turn hit the same cache sets on
  // every row. Rows pack independently, so they split across threads too. (The lambdas take the
  // buffers' addresses: in a worker, the names would be the worker's own thread_local buffers.)
  float* packed_weights = weights.data();
  float* packed_panels = panels.data();
  const auto pack = [&](int64_t k_begin, int64_t k_end) {
    for (int64_t k = k_begin; k < k_end; ++k) {
      for (int64_t m0 = 0; m0 < m_blocked; m0 += rows) {
        LoadFloats(stationary, k, m0, rows, packed_weights + m0 * k_size + k * rows);
      }
      for (int64_t p = 0; p < panel_count; ++p) {
        LoadFloats(moving, k, p * width, width, packed_panels + (p * k_size + k) * width);
      }
    }
  };
  const bool parallel = m_blocked * n_blocked * k_size >= kParallelMacs;
  if (parallel) {
    ParallelFor(k_size, pack);
  } else {
    pack(0, k_size);
  }
  const bool fused = bits > 128 && PanelProductsAreExact(bits, weights, panels);
  const PanelKernel kernel = KernelFor(bits, fused);
  // Row blocks write disjoint rows of out, so they split across threads with no effect on the
  // result.
  const auto run = [&](int64_t begin, int64_t end) {
    kernel.run(packed_weights, packed_panels, out, k_size, begin * rows, end * rows, panel_count);
  };
  if (parallel) {
    ParallelFor(m_blocked / rows, run);
  } else {
    run(0, m_blocked / rows);
  }
  // The edges (rows past the last full row block, columns past the last full panel), element
  // by element in the same k order. Each output element is the panels' or the edges', never both.
  if (m_blocked == m_size && n_blocked == n_size) return;
  const int64_t first_column = m_blocked < m_size ? 0 : n_blocked;
  thread_local std::vector<float> stationary_row, moving_row;
  stationary_row.resize(m_size);
  moving_row.resize(n_size);
  for (int64_t k = 0; k < k_size; ++k) {
    LoadFloats(stationary, k, 0, m_size, stationary_row.data());
    LoadFloats(moving, k, first_column, n_size - first_column, &moving_row[first_column]);
    for (int64_t m = 0; m < m_size; ++m) {
      float* o = out.row(m);
      const float w = stationary_row[m];
      for (int64_t n = m < m_blocked ? n_blocked : 0; n < n_size; ++n) o[n] += w * moving_row[n];
    }
  }
}

}  // namespace trn::sim
