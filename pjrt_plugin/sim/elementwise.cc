#include "elementwise.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace trn::sim {

namespace {

Values GatherChunk(const StridedView& view, Domain domain, int64_t first, int64_t n) {
  Values values = Values::Uninitialized(domain, n);
  GatherRange(view, first, values);
  return values;
}

}  // namespace

Values ComputeElementwise(AluOp op, const std::vector<StridedView>& srcs) {
  return ComputeElementwise(op, srcs, 0, srcs[0].num_elements());
}

Values ComputeElementwise(AluOp op, const std::vector<StridedView>& srcs, int64_t first, int64_t n) {
  const bool data_is_second = op == AluOp::kSelect || op == AluOp::kClamp;
  const DType data_dtype = srcs[data_is_second ? 1 : 0].dtype;
  const Domain domain = ComputeDomain(data_dtype);
  auto gather = [&](int i, Domain d) { return GatherChunk(srcs[i], d, first, n); };
  switch (srcs.size()) {
    case 1: {
      Values x = gather(0, domain);
      ApplyUnary(op, data_dtype, x);
      return x;
    }
    case 2: {
      Values a = gather(0, domain);
      ApplyBinary(op, data_dtype, a, gather(1, domain));
      return a;
    }
    default: break;
  }
  Values middle = gather(1, domain);
  if (op == AluOp::kSelect) {
    ApplySelect(gather(0, ComputeDomain(srcs[0].dtype)), middle, gather(2, domain));
  } else {  // clamp(lo, x, hi) = min(max(x, lo), hi)
    ApplyBinary(AluOp::kMax, data_dtype, middle, gather(0, domain));
    ApplyBinary(AluOp::kMin, data_dtype, middle, gather(2, domain));
  }
  return middle;
}

void RunElementwise(AluOp op, const StridedView& dst, const std::vector<StridedView>& srcs) {
  if (srcs.size() <= 2 && InPlaceRows(dst, srcs)) {
    WithDomainType(ComputeDomain(dst.dtype), [&](auto tag) {
      using T = decltype(tag);
      ForEachInPlaceRow(dst, srcs, [&](uint8_t* out, const std::array<const uint8_t*, 3>& in,
                                       int64_t n, int64_t) {
        T* o = reinterpret_cast<T*>(out);
        const T* a = reinterpret_cast<const T*>(in[0]);
        if (srcs.size() == 1) {
          ApplyUnaryTo(op, dst.dtype, o, a, n);
        } else {
          ApplyBinaryTo(op, dst.dtype, o, a, reinterpret_cast<const T*>(in[1]), n);
        }
      });
    });
    return;
  }
  ForEachChunk(dst.num_elements(), CanChunk(dst, srcs), [&](int64_t first, int64_t n) {
    ScatterRange(ComputeElementwise(op, srcs, first, n), dst, first);
  });
}

void RunCopy(const StridedView& dst, const StridedView& src) {
  if (dst.dtype == src.dtype) {
    CopyBits(dst, src);
  } else {
    RunElementwise(AluOp::kCopy, dst, {src});
  }
}

bool CanChunk(const StridedView& dst, const std::vector<StridedView>& srcs) {
  for (const StridedView& src : srcs) {
    if (MayOverlap(dst, src) && !SameDistinctAddresses(dst, src)) return false;
  }
  return true;
}

namespace {

// Whether `dtype`'s elements are stored as its compute domain's C++ type.
bool StoredAsDomain(DType dtype) {
  switch (dtype) {
    case DType::kF32: case DType::kF64: case DType::kS64: case DType::kU64: return true;
    default: return false;
  }
}

// Fewer elements a row than this go through the chunked path: a call per row costs more.
constexpr int64_t kMinInPlaceRow = 32;

bool RowsOfAdjacentElements(const StridedView& view, DType dtype, int64_t length) {
  const int64_t size = DTypeSize(dtype);
  if (view.dtype != dtype || view.count[view.rank - 1] != length ||
      view.stride_bytes[view.rank - 1] != size ||
      reinterpret_cast<uintptr_t>(view.base) % size != 0) {
    return false;
  }
  for (int d = 0; d < view.rank; ++d) {
    if (view.stride_bytes[d] % size != 0) return false;
  }
  return true;
}

}  // namespace

bool InPlaceRows(const StridedView& dst, const std::vector<StridedView>& srcs) {
  const int64_t length = dst.count[dst.rank - 1];
  if (!StoredAsDomain(dst.dtype) || length < kMinInPlaceRow ||
      !RowsOfAdjacentElements(dst, dst.dtype, length)) {
    return false;
  }
  for (const StridedView& src : srcs) {
    if (!RowsOfAdjacentElements(src, dst.dtype, length) ||
        src.num_elements() != dst.num_elements()) {
      return false;
    }
  }
  return CanChunk(dst, srcs);
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
  return RepeatEach(Gather(one, domain), static_cast<int64_t>(n), 0, static_cast<int64_t>(n));
}

Values RepeatEach(const Values& per_row, int64_t row_length, int64_t first, int64_t n) {
  Values out = Values::Uninitialized(per_row.domain, n);
  WithDomainType(per_row.domain, [&](auto tag) {
    using T = decltype(tag);
    const T* in = per_row.data<T>();
    T* o = out.data<T>();
    // Row by row rather than a division per element.
    for (int64_t i = 0; i < n;) {
      const int64_t row = (first + i) / row_length;
      const int64_t end = std::min(n, (row + 1) * row_length - first);
      for (; i < end; ++i) o[i] = in[row];
    }
  });
  return out;
}

}  // namespace trn::sim
