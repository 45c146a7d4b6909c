// Narrow float formats (bf16, f16, f8e5m2, f8e4m3fn): decoding, and encoding with one rounding
// to nearest even, matching ml_dtypes' conversions bit for bit (NaN keeps its sign and becomes
// the format's canonical quiet NaN; overflow gives inf, or NaN for e4m3fn which has no inf).
#pragma once

#include <cstdint>
#include <cstring>

#include "dtype.h"

namespace trn::sim {

inline float Bf16ToFloat(uint16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &wide, 4);
  return f;
}

inline uint16_t FloatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

// Encodes `value` in a narrow float dtype (kBF16, kF16, kF8E5M2, kF8E4M3FN).
uint16_t EncodeNarrowFloat(double value, DType dtype);

// The value of every bit pattern of kF16, kF8E5M2 or kF8E4M3FN (a table built once), so decoding
// loops index an array instead of calling through a guard per element.
const float* NarrowFloatTable(DType dtype);

}  // namespace trn::sim
