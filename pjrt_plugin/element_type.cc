#include "element_type.h"

namespace trn::pjrt {
namespace {

struct TypeName {
  PJRT_Buffer_Type type;
  const char* name;
  int byte_size;   // 0: not byte-addressable (sub-byte types, token)
  bool on_device;  // a dtype of the program format that NeuronCores hold
};

constexpr TypeName kTypeNames[] = {
    {PJRT_Buffer_Type_PRED, "pred", 1, true},
    {PJRT_Buffer_Type_S8, "s8", 1, true},
    {PJRT_Buffer_Type_S16, "s16", 2, true},
    {PJRT_Buffer_Type_S32, "s32", 4, true},
    {PJRT_Buffer_Type_S64, "s64", 8, true},
    {PJRT_Buffer_Type_U8, "u8", 1, true},
    {PJRT_Buffer_Type_U16, "u16", 2, true},
    {PJRT_Buffer_Type_U32, "u32", 4, true},
    {PJRT_Buffer_Type_U64, "u64", 8, true},
    {PJRT_Buffer_Type_F16, "f16", 2, true},
    {PJRT_Buffer_Type_F32, "f32", 4, true},
    {PJRT_Buffer_Type_BF16, "bf16", 2, true},
    {PJRT_Buffer_Type_F8E5M2, "f8e5m2", 1, true},
    {PJRT_Buffer_Type_F8E4M3FN, "f8e4m3fn", 1, true},
    {PJRT_Buffer_Type_F64, "f64", 8, false},
    {PJRT_Buffer_Type_C64, "c64", 8, true},
    {PJRT_Buffer_Type_C128, "c128", 16, false},
    // One value per byte in its low nibble, as jaxlib's host buffers hold them
    // (docs/pjrt-surface.md).
    {PJRT_Buffer_Type_S4, "s4", 1, true},
    {PJRT_Buffer_Type_U4, "u4", 1, true},
    {PJRT_Buffer_Type_S2, "s2", 0, false},
    {PJRT_Buffer_Type_U2, "u2", 0, false},
    {PJRT_Buffer_Type_TOKEN, "token", 0, false},
    {PJRT_Buffer_Type_F8E4M3B11FNUZ, "f8e4m3b11fnuz", 1, false},
    {PJRT_Buffer_Type_F8E5M2FNUZ, "f8e5m2fnuz", 1, false},
    {PJRT_Buffer_Type_F8E4M3FNUZ, "f8e4m3fnuz", 1, false},
    {PJRT_Buffer_Type_F8E4M3, "f8e4m3", 1, false},
    {PJRT_Buffer_Type_F8E3M4, "f8e3m4", 1, false},
    {PJRT_Buffer_Type_F8E8M0FNU, "f8e8m0fnu", 1, false},
    {PJRT_Buffer_Type_F4E2M1FN, "f4e2m1fn", 0, false},
};

const TypeName* Find(PJRT_Buffer_Type type) {
  for (const TypeName& t : kTypeNames) {
    if (t.type == type) return &t;
  }
  return nullptr;
}

constexpr const char* kSupported =
    "NeuronCores hold pred, s8, s16, s32, s64, u8, u16, u32, u64, f16, bf16, f32, f8e5m2, "
    "f8e4m3fn, s4 and u4 (one per byte) and c64 (as float32 pairs)";

}  // namespace

std::string ElementTypeName(PJRT_Buffer_Type type) {
  const TypeName* t = Find(type);
  return t != nullptr ? t->name : "type" + std::to_string(static_cast<int>(type));
}

std::string ShapeString(PJRT_Buffer_Type type, const std::vector<int64_t>& dims) {
  std::string s = ElementTypeName(type) + "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) s += ",";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

StatusOr<sim::DType> DeviceDType(PJRT_Buffer_Type type, const std::string& what) {
  const TypeName* t = Find(type);
  if (t != nullptr && t->on_device) return static_cast<sim::DType>(type);
  if (type == PJRT_Buffer_Type_F64) {
    return InvalidArgument("NeuronCores have no float64 type: cannot place " + what +
                           "; use float32 (in JAX: leave jax_enable_x64 off, or set TRN_FLOAT64=float32 to "
                           "compute float64 as float32; in PyTorch: .float())");
  }
  if (type == PJRT_Buffer_Type_C128) {
    return InvalidArgument("NeuronCores have no float64, so no complex128: cannot place " + what +
                           "; use complex64 (in JAX: leave jax_enable_x64 off)");
  }
  return InvalidArgument("NeuronCores have no " + ElementTypeName(type) +
                         " type: cannot place " + what + "; " + kSupported);
}

int64_t ElementSize(sim::DType dtype) {
  const TypeName* t = Find(static_cast<PJRT_Buffer_Type>(dtype));
  return t != nullptr ? t->byte_size : 0;
}

StatusOr<int64_t> DenseByteSize(sim::DType dtype, const std::vector<int64_t>& dims) {
  int64_t size = ElementSize(dtype);
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) {
      return InvalidArgument("dimension " + std::to_string(i) + " is negative (" +
                             std::to_string(dims[i]) + ")");
    }
    if (dims[i] != 0 && size > INT64_MAX / dims[i]) {
      return InvalidArgument("array size overflows 64 bits");
    }
    size *= dims[i];
  }
  return size;
}

}  // namespace trn::pjrt
