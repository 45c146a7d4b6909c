// Element types of the program format; the codes are PJRT_Buffer_Type's (docs/program-format.md).
#pragma once

#include <cstdint>
#include <string>

namespace trn::sim {

enum class DType : uint8_t {
  kInvalid = 0,
  kPred = 1,
  kS8 = 2,
  kS16 = 3,
  kS32 = 4,
  kS64 = 5,
  kU8 = 6,
  kU16 = 7,
  kU32 = 8,
  kU64 = 9,
  kF16 = 10,
  kF32 = 11,
  kF64 = 12,
  kBF16 = 13,
  kF8E5M2 = 16,
  kF8E4M3FN = 17,
};

#define TRN_DTYPE_API __attribute__((visibility("default")))

// 0 for a code the format does not know.
TRN_DTYPE_API int DTypeSize(DType t);
TRN_DTYPE_API bool IsValidDType(uint8_t code);
TRN_DTYPE_API bool IsFloat(DType t);
TRN_DTYPE_API bool IsSigned(DType t);  // signed integers
TRN_DTYPE_API std::string DTypeName(DType t);

}  // namespace trn::sim
