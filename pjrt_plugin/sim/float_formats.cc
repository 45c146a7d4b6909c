#include "float_formats.h"

#include <cmath>
#include <vector>

namespace trn::sim {
namespace {

struct FloatFormat {
  int exponent_bits;
  int mantissa_bits;
  int bias;
  bool has_inf;       // IEEE-style; e4m3fn ("finite") has no inf and one NaN mantissa
  uint32_t nan_bits;  // canonical quiet NaN without the sign
};

constexpr FloatFormat kBf16{8, 7, 127, true, 0x7fc0};
constexpr FloatFormat kF16{5, 10, 15, true, 0x7e00};
constexpr FloatFormat kF8E5M2{5, 2, 15, true, 0x7e};
constexpr FloatFormat kF8E4M3FN{4, 3, 7, false, 0x7f};

const FloatFormat& FormatOf(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return kBf16;
    case DType::kF16: return kF16;
    case DType::kF8E5M2: return kF8E5M2;
    default: return kF8E4M3FN;
  }
}

uint32_t Encode(double value, const FloatFormat& f) {
  const int m = f.mantissa_bits;
  const uint32_t sign = std::signbit(value) ? 1u << (f.exponent_bits + m) : 0u;
  if (std::isnan(value)) return sign | f.nan_bits;
  // The largest exponent of a finite number, and the largest finite magnitude: e4m3fn uses the
  // all-ones exponent for numbers, keeping only mantissa all-ones for NaN.
  const int emax = f.has_inf ? (1 << f.exponent_bits) - 2 - f.bias
                             : (1 << f.exponent_bits) - 1 - f.bias;
  const double max_finite = f.has_inf ? std::ldexp(2.0 - std::ldexp(1.0, -m), emax)
                                      : std::ldexp(2.0 - std::ldexp(1.0, 1 - m), emax);
  const uint32_t overflow =
      f.has_inf ? sign | (((1u << f.exponent_bits) - 1) << m) : sign | f.nan_bits;
  const double magnitude = std::fabs(value);
  if (std::isinf(magnitude)) return overflow;
  if (magnitude == 0) return sign;
  const int emin = 1 - f.bias;
  int exponent;
  std::frexp(magnitude, &exponent);
  exponent -= 1;  // magnitude in [2^exponent, 2^(exponent+1))
  const int quantum = (exponent > emin ? exponent : emin) - m;
  const double units = std::nearbyint(std::ldexp(magnitude, -quantum));  // ties to even
  const double rounded = std::ldexp(units, quantum);
  if (rounded > max_finite) return overflow;
  if (units == 0) return sign;
  std::frexp(rounded, &exponent);
  exponent -= 1;
  if (exponent < emin) return sign | static_cast<uint32_t>(units);  // subnormal
  const uint32_t mantissa = static_cast<uint32_t>(std::ldexp(rounded, m - exponent)) - (1u << m);
  return sign | (static_cast<uint32_t>(exponent + f.bias) << m) | mantissa;
}

float Decode(uint32_t bits, const FloatFormat& f) {
  const int m = f.mantissa_bits;
  const bool negative = (bits >> (f.exponent_bits + m)) & 1u;
  const uint32_t exponent_field = (bits >> m) & ((1u << f.exponent_bits) - 1);
  const uint32_t mantissa = bits & ((1u << m) - 1);
  const uint32_t all_ones = (1u << f.exponent_bits) - 1;
  float value;
  if (f.has_inf && exponent_field == all_ones) {
    value = mantissa == 0 ? INFINITY : NAN;
  } else if (!f.has_inf && exponent_field == all_ones && mantissa == (1u << m) - 1) {
    value = NAN;
  } else if (exponent_field == 0) {
    value = static_cast<float>(std::ldexp(static_cast<double>(mantissa), 1 - f.bias - m));
  } else {
    value = static_cast<float>(std::ldexp(static_cast<double>(mantissa + (1u << m)),
                                          static_cast<int>(exponent_field) - f.bias - m));
  }
  return negative ? -value : value;
}

std::vector<float> BuildTable(const FloatFormat& f) {
  std::vector<float> table(size_t{1} << (1 + f.exponent_bits + f.mantissa_bits));
  for (size_t bits = 0; bits < table.size(); ++bits) table[bits] = Decode(bits, f);
  return table;
}

}  // namespace

uint16_t EncodeNarrowFloat(double value, DType dtype) {
  return static_cast<uint16_t>(Encode(value, FormatOf(dtype)));
}

const float* NarrowFloatTable(DType dtype) {
  static const std::vector<float> f16 = BuildTable(kF16);
  static const std::vector<float> e5m2 = BuildTable(kF8E5M2);
  static const std::vector<float> e4m3fn = BuildTable(kF8E4M3FN);
  switch (dtype) {
    case DType::kF16: return f16.data();
    case DType::kF8E5M2: return e5m2.data();
    default: return e4m3fn.data();
  }
}

}  // namespace trn::sim
