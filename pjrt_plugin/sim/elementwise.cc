#include "elementwise.h"

#include <cstring>

namespace trn::sim {

Values ComputeElementwise(AluOp op, const std::vector<StridedView>& srcs) {
  const bool data_is_second = op == AluOp::kSelect || op == AluOp::kClamp;
  const DType data_dtype = srcs[data_is_second ? 1 : 0].dtype;
  const Domain domain = ComputeDomain(data_dtype);
  switch (srcs.size()) {
    case 1: {
      Values x = Gather(srcs[0], domain);
      ApplyUnary(op, data_dtype, x);
      return x;
    }
    case 2: {
      Values a = Gather(srcs[0], domain);
      ApplyBinary(op, data_dtype, a, Gather(srcs[1], domain));
      return a;
    }
    default: break;
  }
  Values middle = Gather(srcs[1], domain);
  if (op == AluOp::kSelect) {
    ApplySelect(Gather(srcs[0], ComputeDomain(srcs[0].dtype)), middle, Gather(srcs[2], domain));
  } else {  // clamp(lo, x, hi) = min(max(x, lo), hi)
    ApplyBinary(AluOp::kMax, data_dtype, middle, Gather(srcs[0], domain));
    ApplyBinary(AluOp::kMin, data_dtype, middle, Gather(srcs[2], domain));
  }
  return middle;
}

Values ScalarValues(const Scalar& scalar, Domain domain, size_t n) {
  // Round through a one-element buffer of the scalar's dtype, so an f16 immediate of 0.1 is
  // the f16 nearest 0.1, exactly as if it had been loaded from memory.
  uint8_t storage[8] = {};
  StridedView one;
  one.base = storage;
  one.dtype = scalar.dtype;
  one.rank = 1;
  one.count[0] = 1;
  one.stride_bytes[0] = 8;
  Values raw;
  if (IsFloat(scalar.dtype)) {
    raw = Values::Make(Domain::kF64, 1);
    raw.f64[0] = scalar.float_value;
  } else if (IsSigned(scalar.dtype)) {
    raw = Values::Make(Domain::kI64, 1);
    raw.i64[0] = scalar.int_value;
  } else {
    raw = Values::Make(Domain::kU64, 1);
    raw.u64[0] = static_cast<uint64_t>(scalar.int_value);
  }
  Scatter(raw, one);
  return RepeatEach(Gather(one, domain), n);
}

Values RepeatEach(const Values& per_row, size_t row_length) {
  Values out = Values::Make(per_row.domain, per_row.size() * row_length);
  WithDomainType(per_row.domain, [&](auto tag) {
    using T = decltype(tag);
    const T* in = per_row.data<T>();
    T* o = out.data<T>();
    for (size_t r = 0; r < per_row.size(); ++r) {
      for (size_t i = 0; i < row_length; ++i) o[r * row_length + i] = in[r];
    }
  });
  return out;
}

}  // namespace trn::sim
