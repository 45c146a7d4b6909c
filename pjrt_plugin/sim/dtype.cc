#include "dtype.h"

namespace trn::sim {

int DTypeSize(DType t) {
  switch (t) {
    case DType::kPred: case DType::kS8: case DType::kU8: case DType::kF8E5M2:
    case DType::kF8E4M3FN:
      return 1;
    case DType::kS16: case DType::kU16: case DType::kF16: case DType::kBF16:
      return 2;
    case DType::kS32: case DType::kU32: case DType::kF32:
      return 4;
    case DType::kS64: case DType::kU64: case DType::kF64:
      return 8;
    case DType::kInvalid:
      return 0;
  }
  return 0;
}

bool IsValidDType(uint8_t code) { return DTypeSize(static_cast<DType>(code)) != 0; }

bool IsFloat(DType t) {
  switch (t) {
    case DType::kF16: case DType::kF32: case DType::kF64: case DType::kBF16:
    case DType::kF8E5M2: case DType::kF8E4M3FN:
      return true;
    default:
      return false;
  }
}

bool IsSigned(DType t) {
  return t == DType::kS8 || t == DType::kS16 || t == DType::kS32 || t == DType::kS64;
}

std::string DTypeName(DType t) {
  switch (t) {
    case DType::kPred: return "pred";
    case DType::kS8: return "s8";
    case DType::kS16: return "s16";
    case DType::kS32: return "s32";
    case DType::kS64: return "s64";
    case DType::kU8: return "u8";
    case DType::kU16: return "u16";
    case DType::kU32: return "u32";
    case DType::kU64: return "u64";
    case DType::kF16: return "f16";
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kBF16: return "bf16";
    case DType::kF8E5M2: return "f8e5m2";
    case DType::kF8E4M3FN: return "f8e4m3fn";
    case DType::kInvalid: break;
  }
  return "dtype(" + std::to_string(static_cast<int>(t)) + ")";
}

}  // namespace trn::sim
