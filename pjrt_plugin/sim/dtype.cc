// The dtype table's queries, generated from isa.def's TRN_DTYPE rows.
#include "dtype.h"

#include <string_view>

namespace trn::sim {

int DTypeSize(DType t) {
  switch (t) {
#define TRN_DTYPE(Camel, snake, code, size, cls) case DType::k##Camel: return size;
#include "isa.def"
    case DType::kInvalid: break;
  }
  return 0;
}

bool IsValidDType(uint8_t code) { return DTypeSize(static_cast<DType>(code)) != 0; }

bool IsFloat(DType t) {
  switch (t) {
#define TRN_DTYPE(Camel, snake, code, size, cls) case DType::k##Camel: return std::string_view(#cls) == "float";
#include "isa.def"
    case DType::kInvalid: break;
  }
  return false;
}

bool IsSigned(DType t) {
  switch (t) {
#define TRN_DTYPE(Camel, snake, code, size, cls) case DType::k##Camel: return std::string_view(#cls) == "signed";
#include "isa.def"
    case DType::kInvalid: break;
  }
  return false;
}

bool IsTableOnly(DType t) { return t == DType::kC64 || t == DType::kS4 || t == DType::kU4; }

std::string DTypeName(DType t) {
  switch (t) {
#define TRN_DTYPE(Camel, snake, code, size, cls) case DType::k##Camel: return #snake;
#include "isa.def"
    case DType::kInvalid: break;
  }
  return "dtype(" + std::to_string(static_cast<int>(t)) + ")";
}

}  // namespace trn::sim
