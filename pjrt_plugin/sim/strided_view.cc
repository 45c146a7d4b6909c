#include "strided_view.h"

#include <cstring>
#include <vector>

#include "bf16_rows.h"
#include "float_formats.h"

namespace trn::sim {
namespace {

template <typename S, typename D, typename F>
void LoadLoop(const uint8_t* p, int64_t stride, int64_t n, D* out, F decode) {
  if (stride == static_cast<int64_t>(sizeof(S))) {
    for (int64_t i = 0; i < n; ++i) {
      S v;
      std::memcpy(&v, p + i * sizeof(S), sizeof(S));
      out[i] = decode(v);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      S v;
      std::memcpy(&v, p + i * stride, sizeof(S));
      out[i] = decode(v);
    }
  }
}

template <typename S, typename D, typename F>
void StoreLoop(uint8_t* p, int64_t stride, int64_t n, const D* in, F encode) {
  if (stride == static_cast<int64_t>(sizeof(S))) {
    for (int64_t i = 0; i < n; ++i) {
      const S v = encode(in[i]);
      std::memcpy(p + i * sizeof(S), &v, sizeof(S));
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const S v = encode(in[i]);
      std::memcpy(p + i * stride, &v, sizeof(S));
    }
  }
}

template <typename D>
void LoadRow(DType dtype, const uint8_t* p, int64_t stride, int64_t n, D* out) {
  auto plain = [](auto v) { return Convert<D>(v); };
  switch (dtype) {
    case DType::kPred: return LoadLoop<uint8_t>(p, stride, n, out, [](uint8_t v) { return D(v != 0); });
    case DType::kS8: return LoadLoop<int8_t>(p, stride, n, out, plain);
    case DType::kS16: return LoadLoop<int16_t>(p, stride, n, out, plain);
    case DType::kS32: return LoadLoop<int32_t>(p, stride, n, out, plain);
    case DType::kS64: return LoadLoop<int64_t>(p, stride, n, out, plain);
    case DType::kU8: return LoadLoop<uint8_t>(p, stride, n, out, plain);
    case DType::kU16: return LoadLoop<uint16_t>(p, stride, n, out, plain);
    case DType::kU32: return LoadLoop<uint32_t>(p, stride, n, out, plain);
    case DType::kU64: return LoadLoop<uint64_t>(p, stride, n, out, plain);
    case DType::kF32: return LoadLoop<float>(p, stride, n, out, plain);
    case DType::kF64: return LoadLoop<double>(p, stride, n, out, plain);
    case DType::kBF16:
      if constexpr (std::is_same_v<D, float>) {
        if (stride == 2) return WidenBf16Row(p, n, out);
      }
      return LoadLoop<uint16_t>(p, stride, n, out, [](uint16_t b) { return Convert<D>(Bf16ToFloat(b)); });
    case DType::kF16: {
      const float* table = NarrowFloatTable(dtype);
      return LoadLoop<uint16_t>(p, stride, n, out, [table](uint16_t b) { return Convert<D>(table[b]); });
    }
    case DType::kF8E5M2:
    case DType::kF8E4M3FN: {
      const float* table = NarrowFloatTable(dtype);
      return LoadLoop<uint8_t>(p, stride, n, out, [table](uint8_t b) { return Convert<D>(table[b]); });
    }
    case DType::kC64:  // loaded as f32 pairs: no access pattern is c64
    case DType::kS4:   // loaded as s8 / u8: no access pattern is s4 or u4
    case DType::kU4:
    case DType::kInvalid: return;
  }
}

template <typename D>
void StoreRow(DType dtype, uint8_t* p, int64_t stride, int64_t n, const D* in) {
  switch (dtype) {
    case DType::kPred: return StoreLoop<uint8_t>(p, stride, n, in, [](D v) { return uint8_t(v != 0); });
    case DType::kS8: return StoreLoop<int8_t>(p, stride, n, in, Convert<int8_t, D>);
    case DType::kS16: return StoreLoop<int16_t>(p, stride, n, in, Convert<int16_t, D>);
    case DType::kS32: return StoreLoop<int32_t>(p, stride, n, in, Convert<int32_t, D>);
    case DType::kS64: return StoreLoop<int64_t>(p, stride, n, in, Convert<int64_t, D>);
    case DType::kU8: return StoreLoop<uint8_t>(p, stride, n, in, Convert<uint8_t, D>);
    case DType::kU16: return StoreLoop<uint16_t>(p, stride, n, in, Convert<uint16_t, D>);
    case DType::kU32: return StoreLoop<uint32_t>(p, stride, n, in, Convert<uint32_t, D>);
    case DType::kU64: return StoreLoop<uint64_t>(p, stride, n, in, Convert<uint64_t, D>);
    case DType::kF32: return StoreLoop<float>(p, stride, n, in, Convert<float, D>);
    case DType::kF64: return StoreLoop<double>(p, stride, n, in, Convert<double, D>);
    case DType::kBF16:
      if constexpr (std::is_same_v<D, float>) {
        if (stride == 2) return NarrowToBf16Row(in, n, p);
        return StoreLoop<uint16_t>(p, stride, n, in, FloatToBf16);
      }
      return StoreLoop<uint16_t>(p, stride, n, in, [](D v) { return EncodeNarrowFloat(double(v), DType::kBF16); });
    case DType::kF16:
      return StoreLoop<uint16_t>(p, stride, n, in, [](D v) { return EncodeNarrowFloat(double(v), DType::kF16); });
    case DType::kF8E5M2:
    case DType::kF8E4M3FN:
      return StoreLoop<uint8_t>(p, stride, n, in, [dtype](D v) { return uint8_t(EncodeNarrowFloat(double(v), dtype)); });
    case DType::kC64:  // loaded as f32 pairs: no access pattern is c64
    case DType::kS4:   // loaded as s8 / u8: no access pattern is s4 or u4
    case DType::kU4:
    case DType::kInvalid: return;
  }
}

}  // namespace

int64_t StridedView::num_elements() const {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= count[d];
  return n;
}

Values Gather(const StridedView& view, Domain domain) {
  Values values = Values::Uninitialized(domain, view.num_elements());
  WithDomainType(domain, [&](auto tag) {
    using D = decltype(tag);
    D* out = values.data<D>();
    ForEachRow(view, [&](uint8_t* address, int64_t stride, int64_t n, int64_t first) {
      LoadRow<D>(view.dtype, address, stride, n, out + first);
    });
  });
  return values;
}

void Scatter(const Values& values, const StridedView& view) {
  WithDomainType(values.domain, [&](auto tag) {
    using D = decltype(tag);
    const D* in = values.data<D>();
    ForEachRow(view, [&](uint8_t* address, int64_t stride, int64_t n, int64_t first) {
      StoreRow<D>(view.dtype, address, stride, n, in + first);
    });
  });
}

void GatherRange(const StridedView& view, int64_t first, Values& values) {
  WithDomainType(values.domain, [&](auto tag) {
    using D = decltype(tag);
    D* out = values.data<D>();
    ForEachRowInRange(view, first, static_cast<int64_t>(values.size()),
                      [&](uint8_t* address, int64_t stride, int64_t n, int64_t offset) {
                        LoadRow<D>(view.dtype, address, stride, n, out + offset);
                      });
  });
}

void ScatterRange(const Values& values, const StridedView& view, int64_t first) {
  WithDomainType(values.domain, [&](auto tag) {
    using D = decltype(tag);
    const D* in = values.data<D>();
    ForEachRowInRange(view, first, static_cast<int64_t>(values.size()),
                      [&](uint8_t* address, int64_t stride, int64_t n, int64_t offset) {
                        StoreRow<D>(view.dtype, address, stride, n, in + offset);
                      });
  });
}

namespace {

// [lowest, highest) byte addressed by the view's elements.
std::pair<const uint8_t*, const uint8_t*> ByteRange(const StridedView& view) {
  const uint8_t* low = view.base;
  const uint8_t* high = view.base;
  for (int d = 0; d < view.rank; ++d) {
    const int64_t extent = view.stride_bytes[d] * (view.count[d] - 1);
    (extent < 0 ? low : high) += extent;
  }
  return {low, high + DTypeSize(view.dtype)};
}

// A sufficient test that no two elements share an address: with dims sorted by stride, each
// stride steps past everything the smaller dims span.
bool Distinct(const StridedView& view) {
  std::array<int64_t, 9> strides{};
  int n = 0;
  for (int d = 0; d < view.rank; ++d) {
    if (view.count[d] > 1) strides[n++] = view.stride_bytes[d] < 0 ? -view.stride_bytes[d] : view.stride_bytes[d];
  }
  std::sort(strides.begin(), strides.begin() + n);
  int64_t span = DTypeSize(view.dtype);
  for (int i = 0; i < n; ++i) {
    if (strides[i] < span) return false;
    for (int d = 0; d < view.rank; ++d) {
      const int64_t s = view.stride_bytes[d] < 0 ? -view.stride_bytes[d] : view.stride_bytes[d];
      if (view.count[d] > 1 && s == strides[i]) {
        span = s * view.count[d];
        break;
      }
    }
  }
  return true;
}

// [lowest, highest] byte offset from base of an element's first byte, over dims 1..rank-1
// (within one row of the outermost dim).
std::pair<int64_t, int64_t> InnerOffsets(const StridedView& view) {
  int64_t low = 0, high = 0;
  for (int d = 1; d < view.rank; ++d) {
    const int64_t extent = view.stride_bytes[d] * (view.count[d] - 1);
    (extent < 0 ? low : high) += extent;
  }
  return {low, high};
}

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

// For views with the same positive outermost stride P (tiles: one row per partition): an element
// at A + i*P + x of a meets one at B + j*P + y of b only if (j - i) * P lies strictly between
// A - B + x - y - size_b and A - B + x - y + size_a for some rows i, j. Two tiles at different
// offsets of the same partitions never do, although their bounding ranges span each other.
bool RowsMayMeet(const StridedView& a, const StridedView& b) {
  const int64_t stride = a.stride_bytes[0];
  const auto [a_low, a_high] = InnerOffsets(a);
  const auto [b_low, b_high] = InnerOffsets(b);
  const int64_t offset = a.base - b.base;
  const int64_t low = offset + a_low - b_high - DTypeSize(b.dtype);
  const int64_t high = offset + a_high - b_low + DTypeSize(a.dtype);
  // The smallest row difference m = j - i with m * P > low, at least -(rows of a - 1).
  const int64_t m = std::max(FloorDiv(low, stride) + 1, 1 - a.count[0]);
  return m <= b.count[0] - 1 && m * stride < high;
}

}  // namespace

bool MayOverlap(const StridedView& a, const StridedView& b) {
  if (a.num_elements() == 0 || b.num_elements() == 0) return false;
  const auto [a_low, a_high] = ByteRange(a);
  const auto [b_low, b_high] = ByteRange(b);
  if (!(a_low < b_high && b_low < a_high)) return false;
  if (a.rank > 1 && b.rank > 1 && a.stride_bytes[0] > 0 && a.stride_bytes[0] == b.stride_bytes[0]) {
    return RowsMayMeet(a, b);
  }
  return true;
}

bool SameDistinctAddresses(const StridedView& a, const StridedView& b) {
  if (a.base != b.base || DTypeSize(a.dtype) != DTypeSize(b.dtype) || a.rank != b.rank) return false;
  for (int d = 0; d < a.rank; ++d) {
    if (a.count[d] != b.count[d] || (a.count[d] > 1 && a.stride_bytes[d] != b.stride_bytes[d])) return false;
  }
  return Distinct(a);
}

namespace {

template <int64_t kSize>
void CopyStrided(uint8_t* dst, int64_t dst_stride, const uint8_t* src, int64_t src_stride, int64_t n) {
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * dst_stride, src + i * src_stride, kSize);
}

// n elements of `size` bytes from src to dst (either stride may differ from size: a broadcast
// reads with stride 0). The element size is a constant in each strided loop, so every element
// is one load and one store, not a call to memcpy.
void CopyRow(uint8_t* dst, int64_t dst_stride, const uint8_t* src, int64_t src_stride, int64_t n, int64_t size) {
  if (dst_stride == size && src_stride == size) {
    std::memcpy(dst, src, n * size);
    return;
  }
  switch (size) {
    case 1: return CopyStrided<1>(dst, dst_stride, src, src_stride, n);
    case 2: return CopyStrided<2>(dst, dst_stride, src, src_stride, n);
    case 4: return CopyStrided<4>(dst, dst_stride, src, src_stride, n);
    case 8: return CopyStrided<8>(dst, dst_stride, src, src_stride, n);
    default:
      for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * dst_stride, src + i * src_stride, size);
  }
}

// The innermost rows of a view one after another, in ForEachRow's order.
class RowCursor {
 public:
  explicit RowCursor(const StridedView& view) : view_(view) {}
  const uint8_t* address() const {
    const uint8_t* address = view_.base;
    for (int d = 0; d < view_.rank - 1; ++d) address += index_[d] * view_.stride_bytes[d];
    return address;
  }
  int64_t stride() const { return view_.stride_bytes[view_.rank - 1]; }
  void Next() {
    int d = view_.rank - 2;
    while (d >= 0 && ++index_[d] == view_.count[d]) index_[d--] = 0;
  }

 private:
  const StridedView& view_;
  std::array<int64_t, 9> index_{};
};

}  // namespace

void CopyBits(const StridedView& dst, const StridedView& src) {
  if (src.num_elements() == 0) return;
  const int64_t size = DTypeSize(src.dtype);
  // Disjoint views whose rows pair up (the same innermost count) copy row to row directly.
  if (!MayOverlap(dst, src) && dst.count[dst.rank - 1] == src.count[src.rank - 1]) {
    RowCursor from(src);
    ForEachRow(dst, [&](uint8_t* address, int64_t stride, int64_t n, int64_t) {
      CopyRow(address, stride, from.address(), from.stride(), n, size);
      from.Next();
    });
    return;
  }
  // Otherwise through a contiguous buffer, so overlapping views behave as
  // read-everything-then-write.
  std::vector<uint8_t> bytes(static_cast<size_t>(src.num_elements() * size));
  ForEachRow(src, [&](uint8_t* address, int64_t stride, int64_t n, int64_t first) {
    CopyRow(bytes.data() + first * size, size, address, stride, n, size);
  });
  ForEachRow(dst, [&](uint8_t* address, int64_t stride, int64_t n, int64_t first) {
    CopyRow(address, stride, bytes.data() + first * size, size, n, size);
  });
}

}  // namespace trn::sim
