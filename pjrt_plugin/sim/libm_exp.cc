#include "libm_exp.h"

#include <cmath>
#include <cstring>

#include "vector_width.h"

namespace trn::sim {
namespace {

template <int kLanes>
struct ExpLanes {
  typedef float Floats __attribute__((vector_size(kLanes * sizeof(float))));
  typedef double Doubles __attribute__((vector_size(kLanes * sizeof(double))));
  typedef int64_t Ints __attribute__((vector_size(kLanes * sizeof(int64_t))));
  typedef uint64_t UInts __attribute__((vector_size(kLanes * sizeof(uint64_t))));
};

// ln 2 as a 32-bit head (k · head is exact for |k| < 2^20) and the tail of the next 53 bits.
constexpr double kLn2Head = 0x1.62e42feep-1;
constexpr double kLn2Tail = 0x1.a39ef35793c76p-33;
constexpr double kLog2e = 0x1.71547652b82fep0;
// Adding then subtracting 1.5 · 2^52 rounds a double of magnitude below 2^51 to an integer,
// which the sum's low mantissa bits hold.
constexpr double kRoundShift = 0x1.8p52;
// Inputs are clamped to ±kClamp: e^±120 is far past fp32's overflow and below half its smallest
// subnormal, so the clamped lanes round to the same inf and +0 as the unclamped values.
constexpr double kClamp = 120.0;
// A double's 29 mantissa bits below fp32's 24: a value is 2^28 of them above the float below
// it at a midpoint. Within kNearMidpoint of it (2^-7 fp32 ulp) a lane is left to libm.
constexpr int64_t kBelowFloat = (int64_t{1} << 29) - 1;
constexpr int64_t kMidpoint = int64_t{1} << 28;
constexpr int64_t kNearMidpoint = int64_t{1} << 22;
// The patterns of 2^-126 (fp32's smallest normal), of 2^-151 (below it e^x rounds to +0) and of
// +inf (above it, NaN).
constexpr int64_t kSmallestNormalFloatBits = int64_t{1023 - 126} << 52;
constexpr int64_t kBelowHalfSubnormalBits = int64_t{1023 - 151} << 52;
constexpr int64_t kInfinityBits = int64_t{0x7ff} << 52;
constexpr int64_t kMagnitudeBits = ~(int64_t{1} << 63);

// exp of kLanes floats in double; to_libm[j] != 0 marks the lanes libm must compute.
template <int kLanes>
[[gnu::always_inline]] inline void ExpVector(const float* in, float* out, int64_t* to_libm) {
  using V = ExpLanes<kLanes>;
  using Doubles = typename V::Doubles;
  using Ints = typename V::Ints;
  using UInts = typename V::UInts;
  typename V::Floats x;
  std::memcpy(&x, in, sizeof(x));
  Doubles xd = __builtin_convertvector(x, Doubles);
  xd = xd < -kClamp ? -kClamp : xd;  // max and min forms: a NaN lane stays NaN
  xd = xd > kClamp ? kClamp : xd;
  const Doubles shifted = xd * kLog2e + kRoundShift;
  const Doubles k = shifted - kRoundShift;
  Ints k_int;
  std::memcpy(&k_int, &shifted, sizeof(k_int));
  const double shift = kRoundShift;
  int64_t shift_int;
  std::memcpy(&shift_int, &shift, sizeof(shift_int));
  k_int -= shift_int;
  const Doubles r = (xd - k * kLn2Head) - k * kLn2Tail;  // |r| <= 0.35
  // Taylor series of e^r to r^10: truncation below 2^-42 relative at |r| = 0.35, where 2^-31
  // would do (the window test below), evaluated by Estrin's scheme for short dependency chains.
  const Doubles r2 = r * r, r4 = r2 * r2;
  const Doubles p01 = r + 1.0, p23 = r * (1.0 / 6) + 0.5, p45 = r * (1.0 / 120) + 1.0 / 24;
  const Doubles p67 = r * (1.0 / 5040) + 1.0 / 720, p89 = r * (1.0 / 362880) + 1.0 / 40320;
  const Doubles p0123 = p23 * r2 + p01, p4567 = p67 * r2 + p45;
  const Doubles p8910 = r2 * (1.0 / 3628800) + p89;
  const Doubles p = (p8910 * r4 + p4567) * r4 + p0123;
  const Ints scale_bits = (k_int + 1023) << 52;
  Doubles scale;
  std::memcpy(&scale, &scale_bits, sizeof(scale));
  const Doubles y = p * scale;  // exact: a power of two, y stays a normal double
  const typename V::Floats rounded = __builtin_convertvector(y, typename V::Floats);
  std::memcpy(out, &rounded, sizeof(rounded));
  // The tests on y's bits: y >= 0 unless NaN, so its pattern orders as its value does.
  Ints y_bits;
  std::memcpy(&y_bits, &y, sizeof(y_bits));
  const Ints from_midpoint = (y_bits & kBelowFloat) - kMidpoint;
  // One unsigned compare for each range: |from_midpoint| < kNearMidpoint, y_bits in
  // [kBelowHalfSubnormalBits, kSmallestNormalFloatBits), and NaN (either sign).
  const UInts near_midpoint =
      (UInts)(from_midpoint + kNearMidpoint) < (uint64_t)(2 * kNearMidpoint - 1);
  const UInts subnormal = (UInts)(y_bits - kBelowHalfSubnormalBits) <
                          (uint64_t)(kSmallestNormalFloatBits - kBelowHalfSubnormalBits);
  const UInts nan = (UInts)(y_bits & kMagnitudeBits) > (uint64_t)kInfinityBits;
  const UInts mask = near_midpoint | subnormal | nan;
  std::memcpy(to_libm, &mask, sizeof(mask));
}

// Two vectors an iteration: their independent chains overlap.
template <int kLanes>
[[gnu::always_inline]] inline void ExpRow(const float* in, int64_t n, float* out) {
  constexpr int kStep = 2 * kLanes;
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) {
    float x[kStep];
    std::memcpy(x, in + i, sizeof(x));  // out may be in
    int64_t to_libm[kStep];
    ExpVector<kLanes>(x, out + i, to_libm);
    ExpVector<kLanes>(x + kLanes, out + i + kLanes, to_libm + kLanes);
    int64_t any = 0;
    for (int j = 0; j < kStep; ++j) any |= to_libm[j];
    if (any == 0) continue;
    for (int j = 0; j < kStep; ++j) {
      if (to_libm[j] != 0) out[i + j] = std::exp(x[j]);
    }
  }
  for (; i < n; ++i) out[i] = std::exp(in[i]);
}

void ExpRow128(const float* in, int64_t n, float* out) { ExpRow<2>(in, n, out); }

#if defined(__x86_64__)
[[gnu::target("avx2")]] void ExpRow256(const float* in, int64_t n, float* out) {
  ExpRow<4>(in, n, out);
}
[[gnu::target("avx512f")]] void ExpRow512(const float* in, int64_t n, float* out) {
  ExpRow<8>(in, n, out);
}
#endif

using ExpKernel = void (*)(const float*, int64_t, float*);

ExpKernel ExpKernelFor(int bits) {
#if defined(__x86_64__)
  if (bits == 512) return ExpRow512;
  if (bits == 256) return ExpRow256;
#endif
  (void)bits;
  return ExpRow128;
}

}  // namespace

void LibmExpRow(const float* in, int64_t n, float* out) {
  static const ExpKernel kernel = ExpKernelFor(SimVectorBits());
  kernel(in, n, out);
}

}  // namespace trn::sim
