// A strided view of raw memory (an SBUF/PSUM access pattern or an HBM access pattern resolved to
// addresses), and the two moves every engine is built from: gather a view into contiguous values
// of a compute domain, and scatter values into a view converting to its dtype.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "alu.h"
#include "dtype.h"

namespace trn::sim {

struct StridedView {
  uint8_t* base = nullptr;  // address of element (0, ..., 0)
  DType dtype = DType::kInvalid;
  int rank = 0;             // outermost first; 1..9 (a tile's partitions + 4 free, HBM's 8)
  std::array<int64_t, 9> stride_bytes{};
  std::array<int64_t, 9> count{};

  int64_t num_elements() const;
};

// values[i] = the i-th element of `view` (row-major), converted to `domain`.
Values Gather(const StridedView& view, Domain domain);

// The i-th element of `view` = values[i], converted to the view's dtype.
void Scatter(const Values& values, const StridedView& view);

// The same over elements [first, first + values.size()) of the view: engines work through large
// views in cache-sized chunks with these (values keeps its size and domain).
void GatherRange(const StridedView& view, int64_t first, Values& values);
void ScatterRange(const Values& values, const StridedView& view, int64_t first);

// dst's i-th element = src's i-th element, bit for bit (equal dtypes, equal element counts):
// a copy that converts nothing must not quiet a NaN's payload on a round trip through fp32.
void CopyBits(const StridedView& dst, const StridedView& src);

// Whether any byte of one view's elements lies in the other's address range (a conservative
// bounding-range test).
bool MayOverlap(const StridedView& a, const StridedView& b);

// Whether the views enumerate the same addresses in the same order with the same element size,
// and no address twice: reading element i and then writing element i, in element order, is then
// the same as reading every element before writing any.
bool SameDistinctAddresses(const StridedView& a, const StridedView& b);

// Calls row(address, stride_bytes, count, first_index) for every innermost row of the view.
template <typename F>
void ForEachRow(const StridedView& view, F&& row) {
  std::array<int64_t, 9> index{};
  const int outer = view.rank - 1;
  const int64_t inner = view.count[outer];
  int64_t first = 0;
  while (true) {
    uint8_t* address = view.base;
    for (int d = 0; d < outer; ++d) address += index[d] * view.stride_bytes[d];
    row(address, view.stride_bytes[outer], inner, first);
    first += inner;
    int d = outer - 1;
    while (d >= 0 && ++index[d] == view.count[d]) index[d--] = 0;
    if (d < 0) return;
  }
}

// Calls row(address, stride_bytes, count, offset) for the elements [first, first + n) of the
// view in order, in pieces of innermost rows; offset counts from `first`.
template <typename F>
void ForEachRowInRange(const StridedView& view, int64_t first, int64_t n, F&& row) {
  if (n <= 0) return;
  std::array<int64_t, 9> index{};
  const int outer = view.rank - 1;
  const int64_t inner = view.count[outer];
  int64_t rest = first / inner;
  for (int d = outer - 1; d >= 0; --d) {
    index[d] = rest % view.count[d];
    rest /= view.count[d];
  }
  int64_t column = first % inner, offset = 0;
  while (true) {
    uint8_t* address = view.base + column * view.stride_bytes[outer];
    for (int d = 0; d < outer; ++d) address += index[d] * view.stride_bytes[d];
    const int64_t take = std::min(inner - column, n - offset);
    row(address, view.stride_bytes[outer], take, offset);
    offset += take;
    if (offset == n) return;
    column = 0;
    int d = outer - 1;
    while (d >= 0 && ++index[d] == view.count[d]) index[d--] = 0;
  }
}

}  // namespace trn::sim
