// The ALU shared by VectorE, ScalarE and GpSimd (docs/program-format.md, "Numerics"): op codes,
// compute domains, element conversions, and whole-array op application. Engines gather operands
// into contiguous `Values` of the compute domain, apply ops here (the op is switched on once per
// array, the inner loops are plain and vectorisable), and scatter the result to its dtype.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "dtype.h"
#include "status.h"

namespace trn::sim {

// The op codes, arities and data domains are isa.def's TRN_ALU_OP table.
enum class AluOp : uint8_t {
#define TRN_ALU_OP(Camel, snake, code, arity, data) k##Camel = code,
#include "isa.def"
};

// Exported for the Python bindings' isa_tables().
#define TRN_ALU_API __attribute__((visibility("default")))

// 0 for a code the table does not define.
TRN_ALU_API int AluArity(uint8_t code);
TRN_ALU_API std::string AluOpName(AluOp op);
bool IsReduceOp(AluOp op);

enum class Domain : uint8_t { kF32, kF64, kI64, kU64 };

// Float dtypes compute in f32 (f64 in f64), signed integers in i64, unsigned and pred in u64.
Domain ComputeDomain(DType dtype);

// Whether `op` with `arity` operands is defined for data of `dtype` (bitwise ops need integers,
// transcendental ones floats). The message names the op and the dtype.
Status CheckAluOp(uint8_t code, int arity, DType dtype);

// Element conversion with the format's rules: float->int truncates toward zero and saturates
// (NaN -> 0); int->int wraps; int->float and float<->double round to nearest even.
template <typename To, typename From>
inline To Convert(From v) {
  if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if (std::isnan(v)) return 0;
    if (v <= static_cast<From>(std::numeric_limits<To>::min())) return std::numeric_limits<To>::min();
    if (v >= static_cast<From>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

// std::allocator, except that resize() leaves new elements uninitialised: most arrays are filled
// by a gather right after they are made, and zeroing them first was one more pass over memory.
template <typename T>
struct NoInitAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = NoInitAllocator<U>;
  };
  NoInitAllocator() = default;
  template <typename U>
  NoInitAllocator(const NoInitAllocator<U>&) noexcept {}
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

template <typename T>
using ValueArray = std::vector<T, NoInitAllocator<T>>;

// A contiguous array in one compute domain; only the vector of that domain is used.
struct Values {
  Domain domain = Domain::kF32;
  ValueArray<float> f32;
  ValueArray<double> f64;
  ValueArray<int64_t> i64;
  ValueArray<uint64_t> u64;

  // n zeros.
  static Values Make(Domain domain, size_t n);
  // n elements the caller overwrites before reading.
  static Values Uninitialized(Domain domain, size_t n);
  size_t size() const;
  template <typename T> T* data();
  template <typename T> const T* data() const { return const_cast<Values*>(this)->data<T>(); }
};

// Calls f(T{}) with T the C++ type of `domain`.
template <typename F>
inline decltype(auto) WithDomainType(Domain domain, F&& f) {
  switch (domain) {
    case Domain::kF32: return f(float{});
    case Domain::kF64: return f(double{});
    case Domain::kI64: return f(int64_t{});
    case Domain::kU64: break;
  }
  return f(uint64_t{});
}

// `values` converted element by element to `domain`.
Values ConvertValues(const Values& values, Domain domain);

// x = op(x). `dtype` is the source data dtype (its width bounds popcnt/clz; `not` of pred is
// logical). The op must have passed CheckAluOp.
void ApplyUnary(AluOp op, DType dtype, Values& x);

// a = op(a, b) for binary ops (b in a's domain, same size); compares give 1/0 in a's domain.
// `dtype` is a's data dtype (shift widths).
void ApplyBinary(AluOp op, DType dtype, Values& a, const Values& b);

// The same over raw arrays of a domain's type T (float, double, int64_t, uint64_t), writing
// out[i] = op(x[i]) or op(a[i], b[i]) for i < n: engines apply ops in place in tile memory with
// these when no conversion is needed. out may be x or a (element i is read before it is
// written), and must not overlap them otherwise.
template <typename T>
void ApplyUnaryTo(AluOp op, DType dtype, T* out, const T* x, size_t n);
template <typename T>
void ApplyBinaryTo(AluOp op, DType dtype, T* out, const T* a, const T* b, size_t n);

// on_true = pred != 0 ? on_true : on_false (pred in any domain).
void ApplySelect(const Values& pred, Values& on_true, const Values& on_false);

// out[r] = fold of op over x[r, 0..cols) starting from init (or from x[r, 0] when init is null;
// init holds one value in x's domain).
// Only the reduction ops (IsReduceOp).
Values ReduceRows(AluOp op, const Values& x, int64_t rows, int64_t cols, const Values* init);

}  // namespace trn::sim
