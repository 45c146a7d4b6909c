#include "alu.h"

#include <algorithm>
#include <bit>
#include <string_view>

#include "libm_exp.h"

namespace trn::sim {
namespace {

// The data an op is defined for: isa.def's `data` column (any, int, float).
std::string_view AluData(AluOp op) {
  switch (op) {
#define TRN_ALU_OP(Camel, snake, code, arity, data) case AluOp::k##Camel: return #data;
#include "isa.def"
  }
  return "any";
}

bool IsIntegerOnly(AluOp op) { return AluData(op) == "int"; }

bool IsFloatOnly(AluOp op) { return AluData(op) == "float"; }

uint64_t WidthMask(int bits) { return bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1; }

int BitWidth(DType dtype) { return dtype == DType::kPred ? 1 : 8 * DTypeSize(dtype); }

// out may be x (or a): element i is read before it is written.
template <typename T, typename F>
void Map1(T* out, const T* x, size_t n, F f) {
  for (size_t i = 0; i < n; ++i) out[i] = f(x[i]);
}

template <typename T, typename F>
void Map2(T* out, const T* a, const T* b, size_t n, F f) {
  for (size_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
}

// fp32 exp and logistic through LibmExpRow: libm's bits, vectorised.
bool UnaryFloatExp(AluOp op, float* out, const float* x, size_t n) {
  if (op == AluOp::kExp) {
    LibmExpRow(x, static_cast<int64_t>(n), out);
    return true;
  }
  if (op != AluOp::kLogistic) return false;
  // 1 / (1 + exp(-v)) a block at a time, with exp(-v) in a stack buffer (out may be x).
  constexpr size_t kBlock = 256;
  float e[kBlock];
  for (size_t first = 0; first < n; first += kBlock) {
    const size_t m = std::min(kBlock, n - first);
    for (size_t i = 0; i < m; ++i) e[i] = -x[first + i];
    LibmExpRow(e, static_cast<int64_t>(m), e);
    for (size_t i = 0; i < m; ++i) out[first + i] = 1.0f / (1.0f + e[i]);
  }
  return true;
}

template <typename T>
void UnaryFloat(AluOp op, T* out, const T* x, size_t n) {
  if constexpr (std::is_same_v<T, float>) {
    if (UnaryFloatExp(op, out, x, n)) return;
  }
  switch (op) {
    case AluOp::kCopy: return Map1(out, x, n, [](T v) { return v; });
    case AluOp::kNeg: return Map1(out, x, n, [](T v) { return -v; });
    case AluOp::kAbs: return Map1(out, x, n, [](T v) { return std::fabs(v); });
    case AluOp::kExp: return Map1(out, x, n, [](T v) { return std::exp(v); });
    case AluOp::kExpm1: return Map1(out, x, n, [](T v) { return std::expm1(v); });
    case AluOp::kLog: return Map1(out, x, n, [](T v) { return std::log(v); });
    case AluOp::kLog1p: return Map1(out, x, n, [](T v) { return std::log1p(v); });
    case AluOp::kTanh: return Map1(out, x, n, [](T v) { return std::tanh(v); });
    case AluOp::kLogistic: return Map1(out, x, n, [](T v) { return T(1) / (T(1) + std::exp(-v)); });
    case AluOp::kSqrt: return Map1(out, x, n, [](T v) { return std::sqrt(v); });
    case AluOp::kRsqrt: return Map1(out, x, n, [](T v) { return T(1) / std::sqrt(v); });
    case AluOp::kCbrt: return Map1(out, x, n, [](T v) { return std::cbrt(v); });
    case AluOp::kSin: return Map1(out, x, n, [](T v) { return std::sin(v); });
    case AluOp::kCos: return Map1(out, x, n, [](T v) { return std::cos(v); });
    case AluOp::kTan: return Map1(out, x, n, [](T v) { return std::tan(v); });
    case AluOp::kFloor: return Map1(out, x, n, [](T v) { return std::floor(v); });
    case AluOp::kCeil: return Map1(out, x, n, [](T v) { return std::ceil(v); });
    case AluOp::kRoundNearestEven: return Map1(out, x, n, [](T v) { return std::nearbyint(v); });
    case AluOp::kRoundNearestAfz: return Map1(out, x, n, [](T v) { return std::round(v); });
    // sign keeps ±0 and NaN as they are.
    case AluOp::kSign: return Map1(out, x, n, [](T v) { return v > 0 ? T(1) : v < 0 ? T(-1) : v; });
    case AluOp::kIsFinite:
      return Map1(out, x, n, [](T v) { return std::isfinite(v) ? T(1) : T(0); });
    case AluOp::kReciprocal: return Map1(out, x, n, [](T v) { return T(1) / v; });
    case AluOp::kErf: return Map1(out, x, n, [](T v) { return std::erf(v); });
    case AluOp::kSquare: return Map1(out, x, n, [](T v) { return v * v; });
    default: return;  // rejected by CheckAluOp
  }
}

template <typename T>
void UnaryInteger(AluOp op, DType dtype, T* out, const T* x, size_t n) {
  using U = uint64_t;
  const int width = BitWidth(dtype);
  const U mask = WidthMask(width);
  switch (op) {
    case AluOp::kCopy: return Map1(out, x, n, [](T v) { return v; });
    case AluOp::kNeg:
      return Map1(out, x, n, [](T v) { return static_cast<T>(U{0} - static_cast<U>(v)); });
    case AluOp::kAbs:
      return Map1(out, x, n,
                  [](T v) { return v < 0 ? static_cast<T>(U{0} - static_cast<U>(v)) : v; });
    case AluOp::kSign:
      return Map1(out, x, n, [](T v) { return static_cast<T>((v > 0) - (v < 0)); });
    case AluOp::kNot:
      if (dtype == DType::kPred) return Map1(out, x, n, [](T v) { return static_cast<T>(v == 0); });
      return Map1(out, x, n, [](T v) { return static_cast<T>(~static_cast<U>(v)); });
    case AluOp::kPopcnt:
      return Map1(out, x, n,
                  [mask](T v) { return static_cast<T>(std::popcount(static_cast<U>(v) & mask)); });
    case AluOp::kClz:
      return Map1(out, x, n, [mask, width](T v) {
        return static_cast<T>(width - std::bit_width(static_cast<U>(v) & mask));
      });
    default: return;  // rejected by CheckAluOp
  }
}

template <typename T>
T FloatMax(T a, T b) { return a != a ? a : b != b ? b : a > b ? a : b; }
template <typename T>
T FloatMin(T a, T b) { return a != a ? a : b != b ? b : a < b ? a : b; }

// Compares and the ops every domain shares; false when `op` is not one of them.
template <typename T>
bool CommonBinary(AluOp op, T* out, const T* a, const T* b, size_t n) {
  switch (op) {
    case AluOp::kEq: Map2(out, a, b, n, [](T x, T y) { return T(x == y); }); return true;
    case AluOp::kNe: Map2(out, a, b, n, [](T x, T y) { return T(x != y); }); return true;
    case AluOp::kLt: Map2(out, a, b, n, [](T x, T y) { return T(x < y); }); return true;
    case AluOp::kLe: Map2(out, a, b, n, [](T x, T y) { return T(x <= y); }); return true;
    case AluOp::kGt: Map2(out, a, b, n, [](T x, T y) { return T(x > y); }); return true;
    case AluOp::kGe: Map2(out, a, b, n, [](T x, T y) { return T(x >= y); }); return true;
    default: return false;
  }
}

template <typename T>
void BinaryFloat(AluOp op, T* out, const T* a, const T* b, size_t n) {
  if (CommonBinary(op, out, a, b, n)) return;
  switch (op) {
    case AluOp::kAdd: return Map2(out, a, b, n, [](T x, T y) { return x + y; });
    case AluOp::kSub: return Map2(out, a, b, n, [](T x, T y) { return x - y; });
    case AluOp::kMul: return Map2(out, a, b, n, [](T x, T y) { return x * y; });
    case AluOp::kDiv: return Map2(out, a, b, n, [](T x, T y) { return x / y; });
    case AluOp::kRem: return Map2(out, a, b, n, [](T x, T y) { return std::fmod(x, y); });
    case AluOp::kMax: return Map2(out, a, b, n, FloatMax<T>);
    case AluOp::kMin: return Map2(out, a, b, n, FloatMin<T>);
    case AluOp::kPow: return Map2(out, a, b, n, [](T x, T y) { return std::pow(x, y); });
    case AluOp::kAtan2: return Map2(out, a, b, n, [](T x, T y) { return std::atan2(x, y); });
    default: return;  // rejected by CheckAluOp
  }
}

// XLA's integer power: exponentiation by squaring; negative exponents give 0 except for bases
// 1 and -1.
template <typename T>
T IntegerPow(T base, T exponent) {
  using U = uint64_t;
  if constexpr (std::is_signed_v<T>) {
    if (exponent < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exponent & 1) ? -1 : 1;
      return 0;
    }
  }
  U result = 1, b = static_cast<U>(base), e = static_cast<U>(exponent);
  while (e != 0) {
    if (e & 1) result *= b;
    b *= b;
    e >>= 1;
  }
  return static_cast<T>(result);
}

template <typename T>
void BinaryInteger(AluOp op, DType dtype, T* out, const T* a, const T* b, size_t n) {
  using U = uint64_t;
  if (CommonBinary(op, out, a, b, n)) return;
  const U width = static_cast<U>(BitWidth(dtype));
  const U mask = WidthMask(static_cast<int>(width));
  switch (op) {
    case AluOp::kAdd: return Map2(out, a, b, n, [](T x, T y) { return T(U(x) + U(y)); });
    case AluOp::kSub: return Map2(out, a, b, n, [](T x, T y) { return T(U(x) - U(y)); });
    case AluOp::kMul: return Map2(out, a, b, n, [](T x, T y) { return T(U(x) * U(y)); });
    case AluOp::kDiv:
      return Map2(out, a, b, n, [](T x, T y) -> T {
        if (y == 0) return T(~U{0});
        if constexpr (std::is_signed_v<T>) {
          if (y == -1) return T(U{0} - U(x));  // INT_MIN / -1 = INT_MIN
        }
        return x / y;
      });
    case AluOp::kRem:
      return Map2(out, a, b, n, [](T x, T y) -> T {
        if (y == 0) return x;
        if constexpr (std::is_signed_v<T>) {
          if (y == -1) return 0;
        }
        return x % y;
      });
    case AluOp::kMax: return Map2(out, a, b, n, [](T x, T y) { return x > y ? x : y; });
    case AluOp::kMin: return Map2(out, a, b, n, [](T x, T y) { return x < y ? x : y; });
    case AluOp::kPow: return Map2(out, a, b, n, IntegerPow<T>);
    case AluOp::kAnd: return Map2(out, a, b, n, [](T x, T y) { return T(x & y); });
    case AluOp::kOr: return Map2(out, a, b, n, [](T x, T y) { return T(x | y); });
    case AluOp::kXor: return Map2(out, a, b, n, [](T x, T y) { return T(x ^ y); });
    case AluOp::kShiftLeft:
      return Map2(out, a, b, n,
                  [width](T x, T y) { return U(y) >= width ? T(0) : T(U(x) << U(y)); });
    case AluOp::kShiftRightLogical:
      return Map2(out, a, b, n, [width, mask](T x, T y) {
        return U(y) >= width ? T(0) : T((U(x) & mask) >> U(y));
      });
    case AluOp::kShiftRightArithmetic:
      return Map2(out, a, b, n, [width](T x, T y) {
        // Sign-extend from the dtype's width, then shift; too far fills with the sign.
        const int64_t extended = static_cast<int64_t>(U(x) << (64 - width)) >> (64 - width);
        const U shift = U(y) >= width ? width - 1 : U(y);
        return T(extended >> shift);
      });
    default: return;  // rejected by CheckAluOp
  }
}

}  // namespace

int AluArity(uint8_t code) {
  switch (code) {
#define TRN_ALU_OP(Camel, snake, code, arity, data) case code: return arity;
#include "isa.def"
  }
  return 0;
}

std::string AluOpName(AluOp op) {
  switch (op) {
#define TRN_ALU_OP(Camel, snake, code, arity, data) case AluOp::k##Camel: return #snake;
#include "isa.def"
  }
  return "alu_op(" + std::to_string(static_cast<int>(op)) + ")";
}

bool IsReduceOp(AluOp op) {
  switch (op) {
    case AluOp::kAdd: case AluOp::kMax: case AluOp::kMin: case AluOp::kMul: case AluOp::kAnd:
    case AluOp::kOr: case AluOp::kXor:
      return true;
    default:
      return false;
  }
}

Domain ComputeDomain(DType dtype) {
  if (dtype == DType::kF64) return Domain::kF64;
  if (IsFloat(dtype)) return Domain::kF32;
  return IsSigned(dtype) ? Domain::kI64 : Domain::kU64;
}

Status CheckAluOp(uint8_t code, int arity, DType dtype) {
  const int op_arity = AluArity(code);
  if (op_arity == 0) return InvalidArgument("unknown ALU op code " + std::to_string(code));
  const AluOp op = static_cast<AluOp>(code);
  if (op_arity != arity) {
    return InvalidArgument("ALU op " + AluOpName(op) + " takes " + std::to_string(op_arity) +
                           " operands, the instruction gives " + std::to_string(arity));
  }
  if (IsFloat(dtype) && IsIntegerOnly(op)) {
    return InvalidArgument("ALU op " + AluOpName(op) + " needs integer data, got " + DTypeName(dtype));
  }
  if (!IsFloat(dtype) && IsFloatOnly(op)) {
    return InvalidArgument("ALU op " + AluOpName(op) + " needs float data, got " + DTypeName(dtype));
  }
  return Status::Ok();
}

template <> float* Values::data<float>() { return f32.data(); }
template <> double* Values::data<double>() { return f64.data(); }
template <> int64_t* Values::data<int64_t>() { return i64.data(); }
template <> uint64_t* Values::data<uint64_t>() { return u64.data(); }

Values Values::Make(Domain domain, size_t n) {
  Values v = Uninitialized(domain, n);
  WithDomainType(domain, [&](auto tag) {
    using T = decltype(tag);
    std::fill_n(v.data<T>(), n, T{0});
  });
  return v;
}

Values Values::Uninitialized(Domain domain, size_t n) {
  Values v;
  v.domain = domain;
  WithDomainType(domain, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float>) v.f32.resize(n);
    else if constexpr (std::is_same_v<T, double>) v.f64.resize(n);
    else if constexpr (std::is_same_v<T, int64_t>) v.i64.resize(n);
    else v.u64.resize(n);
  });
  return v;
}

size_t Values::size() const {
  switch (domain) {
    case Domain::kF32: return f32.size();
    case Domain::kF64: return f64.size();
    case Domain::kI64: return i64.size();
    case Domain::kU64: break;
  }
  return u64.size();
}


Values ConvertValues(const Values& values, Domain domain) {
  if (values.domain == domain) return values;
  const size_t n = values.size();
  Values out = Values::Uninitialized(domain, n);
  WithDomainType(values.domain, [&](auto from_tag) {
    using From = decltype(from_tag);
    const From* in = values.data<From>();
    WithDomainType(domain, [&](auto to_tag) {
      using To = decltype(to_tag);
      To* o = out.data<To>();
      for (size_t i = 0; i < n; ++i) o[i] = Convert<To>(in[i]);
    });
  });
  return out;
}

void ApplyUnary(AluOp op, DType dtype, Values& x) {
  WithDomainType(x.domain, [&](auto tag) {
    using T = decltype(tag);
    ApplyUnaryTo(op, dtype, x.data<T>(), x.data<T>(), x.size());
  });
}

void ApplyBinary(AluOp op, DType dtype, Values& a, const Values& b) {
  WithDomainType(a.domain, [&](auto tag) {
    using T = decltype(tag);
    ApplyBinaryTo(op, dtype, a.data<T>(), a.data<T>(), b.data<T>(), a.size());
  });
}

template <typename T>
void ApplyUnaryTo(AluOp op, DType dtype, T* out, const T* x, size_t n) {
  if constexpr (std::is_floating_point_v<T>) UnaryFloat(op, out, x, n);
  else UnaryInteger(op, dtype, out, x, n);
}

template <typename T>
void ApplyBinaryTo(AluOp op, DType dtype, T* out, const T* a, const T* b, size_t n) {
  if constexpr (std::is_floating_point_v<T>) BinaryFloat(op, out, a, b, n);
  else BinaryInteger(op, dtype, out, a, b, n);
}

#define TRN_ALU_INSTANTIATE(T)                                                          \
  template void ApplyUnaryTo<T>(AluOp, DType, T*, const T*, size_t);                    \
  template void ApplyBinaryTo<T>(AluOp, DType, T*, const T*, const T*, size_t);
TRN_ALU_INSTANTIATE(float)
TRN_ALU_INSTANTIATE(double)
TRN_ALU_INSTANTIATE(int64_t)
TRN_ALU_INSTANTIATE(uint64_t)
#undef TRN_ALU_INSTANTIATE

void ApplySelect(const Values& pred, Values& on_true, const Values& on_false) {
  const Values mask = ConvertValues(pred, Domain::kU64);
  const uint64_t* m = mask.data<uint64_t>();
  WithDomainType(on_true.domain, [&](auto tag) {
    using T = decltype(tag);
    T* t = on_true.data<T>();
    const T* f = on_false.data<T>();
    for (size_t i = 0; i < on_true.size(); ++i) t[i] = m[i] != 0 ? t[i] : f[i];
  });
}

Values ReduceRows(AluOp op, const Values& x, int64_t rows, int64_t cols, const Values* init) {
  Values out = Values::Uninitialized(x.domain, rows);
  WithDomainType(x.domain, [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* o = out.data<T>();
    // Folding one element at a time keeps the order (and so the rounding) sequential. Rows are
    // independent: folding kRows of them side by side keeps kRows dependency chains in flight
    // instead of waiting out one operation's latency per element.
    constexpr int64_t kRows = 8;
    auto fold = [&](auto f) {
      int64_t r = 0;
      for (; r + kRows <= rows; r += kRows) {
        const T* block = in + r * cols;
        const int64_t c0 = init ? 0 : 1;
        T acc[kRows];
        for (int64_t j = 0; j < kRows; ++j) acc[j] = init ? init->data<T>()[0] : block[j * cols];
        for (int64_t c = c0; c < cols; ++c) {
          for (int64_t j = 0; j < kRows; ++j) acc[j] = f(acc[j], block[j * cols + c]);
        }
        for (int64_t j = 0; j < kRows; ++j) o[r + j] = acc[j];
      }
      for (; r < rows; ++r) {
        const T* row = in + r * cols;
        int64_t c = 0;
        T acc = init ? init->data<T>()[0] : row[c++];
        for (; c < cols; ++c) acc = f(acc, row[c]);
        o[r] = acc;
      }
    };
    using U = uint64_t;
    if constexpr (std::is_floating_point_v<T>) {
      switch (op) {
        case AluOp::kAdd: return fold([](T a, T b) { return a + b; });
        case AluOp::kMul: return fold([](T a, T b) { return a * b; });
        case AluOp::kMax: return fold(FloatMax<T>);
        case AluOp::kMin: return fold(FloatMin<T>);
        default: return;  // bitwise reductions of floats are rejected by the loader
      }
    } else {
      switch (op) {
        case AluOp::kAdd: return fold([](T a, T b) { return T(U(a) + U(b)); });
        case AluOp::kMul: return fold([](T a, T b) { return T(U(a) * U(b)); });
        case AluOp::kMax: return fold([](T a, T b) { return a > b ? a : b; });
        case AluOp::kMin: return fold([](T a, T b) { return a < b ? a : b; });
        case AluOp::kAnd: return fold([](T a, T b) { return T(a & b); });
        case AluOp::kOr: return fold([](T a, T b) { return T(a | b); });
        case AluOp::kXor: return fold([](T a, T b) { return T(a ^ b); });
        default: return;
      }
    }
  });
  return out;
}

}  // namespace trn::sim
