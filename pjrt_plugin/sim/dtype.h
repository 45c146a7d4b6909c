// Element types of the program format; the codes are PJRT_Buffer_Type's (docs/program-format.md),
// defined in isa.def.
#pragma once

#include <cstdint>
#include <string>

namespace trn::sim {

enum class DType : uint8_t {
  kInvalid = 0,
#define TRN_DTYPE(Camel, snake, code, size, cls) k##Camel = code,
#include "isa.def"
};

#define TRN_DTYPE_API __attribute__((visibility("default")))

// 0 for a code the format does not know.
TRN_DTYPE_API int DTypeSize(DType t);
TRN_DTYPE_API bool IsValidDType(uint8_t code);
TRN_DTYPE_API bool IsFloat(DType t);
TRN_DTYPE_API bool IsSigned(DType t);  // signed integers
TRN_DTYPE_API std::string DTypeName(DType t);
// c64, s4 and u4: a parameter's or an output's type in the tensor table, never an access
// pattern's (isa.def).
TRN_DTYPE_API bool IsTableOnly(DType t);

}  // namespace trn::sim
