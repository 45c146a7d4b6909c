#include "bf16_rows.h"

#include <cstring>

#include "float_formats.h"
#include "vector_width.h"

namespace trn::sim {
namespace {

template <int kLanes>
struct Lanes {
  typedef uint16_t Narrow __attribute__((vector_size(kLanes * sizeof(uint16_t))));
  typedef uint32_t Wide __attribute__((vector_size(kLanes * sizeof(uint32_t))));
  typedef int32_t Mask __attribute__((vector_size(kLanes * sizeof(int32_t))));
};

// Inlined into one function per ISA below, so the vectors match the target's registers.
template <int kLanes>
[[gnu::always_inline]] inline void WidenLanes(const uint8_t* in, int64_t n, float* out) {
  using L = Lanes<kLanes>;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    typename L::Narrow narrow;
    std::memcpy(&narrow, in + 2 * i, sizeof(narrow));
    const typename L::Wide wide = __builtin_convertvector(narrow, typename L::Wide) << 16;
    std::memcpy(out + i, &wide, sizeof(wide));
  }
  for (; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, in + 2 * i, sizeof(bits));
    out[i] = Bf16ToFloat(bits);
  }
}

// FloatToBf16 on every lane: a NaN keeps its top half with the quiet bit set; anything else
// rounds to nearest even by adding 0x7fff plus the lowest kept bit (a carry reaches the
// exponent, and past the largest finite value gives inf, as in the scalar form).
template <int kLanes>
[[gnu::always_inline]] inline void NarrowLanes(const float* in, int64_t n, uint8_t* out) {
  using L = Lanes<kLanes>;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    typename L::Wide bits;
    std::memcpy(&bits, in + i, sizeof(bits));
    const typename L::Wide top = bits >> 16;
    const typename L::Wide rounded = (bits + (0x7fffu + (top & 1u))) >> 16;
    const typename L::Mask nan = (bits & 0x7fffffffu) > 0x7f800000u;
    const typename L::Wide result = nan ? (top | 0x40u) : rounded;
    const typename L::Narrow narrow = __builtin_convertvector(result, typename L::Narrow);
    std::memcpy(out + 2 * i, &narrow, sizeof(narrow));
  }
  for (; i < n; ++i) {
    const uint16_t bits = FloatToBf16(in[i]);
    std::memcpy(out + 2 * i, &bits, sizeof(bits));
  }
}

void Widen128(const uint8_t* in, int64_t n, float* out) { WidenLanes<4>(in, n, out); }
void Narrow128(const float* in, int64_t n, uint8_t* out) { NarrowLanes<4>(in, n, out); }

#if defined(__x86_64__)
[[gnu::target("avx2")]] void Widen256(const uint8_t* in, int64_t n, float* out) {
  WidenLanes<8>(in, n, out);
}
[[gnu::target("avx2")]] void Narrow256(const float* in, int64_t n, uint8_t* out) {
  NarrowLanes<8>(in, n, out);
}
[[gnu::target("avx512f")]] void Widen512(const uint8_t* in, int64_t n, float* out) {
  WidenLanes<16>(in, n, out);
}
[[gnu::target("avx512f")]] void Narrow512(const float* in, int64_t n, uint8_t* out) {
  NarrowLanes<16>(in, n, out);
}
#endif

using WidenKernel = void (*)(const uint8_t*, int64_t, float*);
using NarrowKernel = void (*)(const float*, int64_t, uint8_t*);

WidenKernel WidenFor(int bits) {
#if defined(__x86_64__)
  if (bits == 512) return Widen512;
  if (bits == 256) return Widen256;
#endif
  (void)bits;
  return Widen128;
}

NarrowKernel NarrowFor(int bits) {
#if defined(__x86_64__)
  if (bits == 512) return Narrow512;
  if (bits == 256) return Narrow256;
#endif
  (void)bits;
  return Narrow128;
}

}  // namespace

void WidenBf16Row(const uint8_t* in, int64_t n, float* out) {
  static const WidenKernel kernel = WidenFor(SimVectorBits());
  kernel(in, n, out);
}

void NarrowToBf16Row(const float* in, int64_t n, uint8_t* out) {
  static const NarrowKernel kernel = NarrowFor(SimVectorBits());
  kernel(in, n, out);
}

}  // namespace trn::sim
