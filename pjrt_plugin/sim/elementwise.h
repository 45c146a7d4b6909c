// The elementwise building blocks VectorE, ScalarE and GpSimd share: apply an ALU op to paired
// source views in the op's compute domain, materialise immediates, broadcast per-row scalars.
#pragma once

#include <algorithm>
#include <array>
#include <vector>

#include "alu.h"
#include "host_parallel.h"
#include "program.h"
#include "strided_view.h"

namespace trn::sim {

// op(srcs...) element by element. The compute domain is that of the data operand (select's
// on_true, clamp's x, otherwise the first); select's predicate is read in its own domain.
Values ComputeElementwise(AluOp op, const std::vector<StridedView>& srcs);

// The same for the elements [first, first + n) of every source.
Values ComputeElementwise(AluOp op, const std::vector<StridedView>& srcs, int64_t first, int64_t n);

// dst = op(srcs...): ComputeElementwise, then the result written to dst.
void RunElementwise(AluOp op, const StridedView& dst, const std::vector<StridedView>& srcs);

// A paired copy (DMA, tensor_copy, gp_copy): converts between dtypes, moves bits unchanged
// between equal ones.
void RunCopy(const StridedView& dst, const StridedView& src);

// Whether `dst` may be written chunk by chunk while `srcs` are still being read, with the result
// every instruction defines (all sources read before dst is written): true when no source shares
// memory with dst, or one enumerates exactly dst's (distinct) addresses (an in-place update).
bool CanChunk(const StridedView& dst, const std::vector<StridedView>& srcs);

// Calls body(first, n) over [0, total): in chunks of a few thousand elements when `chunked`,
// otherwise once for the whole range. Chunks bound an instruction's scratch arrays (a tile of
// 128 x 2048 fp32 is 1 MiB per gathered operand) and keep them in cache between gather, op and
// scatter. The chunks of a large instruction are spread over the host's threads (ParallelFor):
// body runs concurrently for distinct ranges, so it may share only what it reads.
template <typename F>
void ForEachChunk(int64_t total, bool chunked, F&& body) {
  constexpr int64_t kChunkElements = 8192;
  // Fewer chunks than this stay on one thread: the hand-off costs about as much as a chunk.
  constexpr int64_t kParallelChunks = 8;
  if (!chunked) {
    if (total > 0) body(int64_t{0}, total);
    return;
  }
  const int64_t chunks = (total + kChunkElements - 1) / kChunkElements;
  const auto run = [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      const int64_t first = c * kChunkElements;
      body(first, std::min(kChunkElements, total - first));
    }
  };
  if (chunks >= kParallelChunks) {
    ParallelFor(chunks, run);
  } else {
    run(0, chunks);
  }
}

// Whether dst = op(srcs...) can be computed in tile or HBM memory itself, row by row, with no
// gather or scatter: dst and every source of one dtype that is stored as its compute domain's
// type (f32, f64, s64, u64: there is nothing to convert), aligned to it, their innermost rows
// adjacent elements of one length, at least a few dozen, and CanChunk(dst, srcs).
bool InPlaceRows(const StridedView& dst, const std::vector<StridedView>& srcs);

// The address of the first element of row `row` (innermost rows in row-major order).
inline uint8_t* RowAddress(const StridedView& view, int64_t row) {
  uint8_t* address = view.base;
  for (int d = view.rank - 2; d >= 0; --d) {
    address += (row % view.count[d]) * view.stride_bytes[d];
    row /= view.count[d];
  }
  return address;
}

// For views that pass InPlaceRows: calls row(dst_row, src_rows, n, r) for every innermost row r
// of dst, src_rows[i] the same row of srcs[i], n its length. Rows of a large instruction spread
// over the host's threads as ForEachChunk's chunks do (each writes only its own dst row).
template <typename F>
void ForEachInPlaceRow(const StridedView& dst, const std::vector<StridedView>& srcs, F&& row) {
  const int64_t length = dst.count[dst.rank - 1];
  const int64_t rows = dst.num_elements() / length;
  const auto run = [&](int64_t begin, int64_t end) {
    std::array<const uint8_t*, 3> in{};
    for (int64_t r = begin; r < end; ++r) {
      for (size_t i = 0; i < srcs.size(); ++i) in[i] = RowAddress(srcs[i], r);
      row(RowAddress(dst, r), in, length, r);
    }
  };
  // The same threshold as ForEachChunk's: below it a hand-off costs about as much as the work.
  if (rows > 1 && dst.num_elements() >= 8 * 8192) {
    ParallelFor(rows, run);
  } else {
    run(0, rows);
  }
}

// `n` copies of an immediate, first rounded to its own dtype, then converted to `domain`.
Values ScalarValues(const Scalar& scalar, Domain domain, size_t n);

// Elements [first, first + n) of `per_row`'s values each repeated `row_length` times.
Values RepeatEach(const Values& per_row, int64_t row_length, int64_t first, int64_t n);

}  // namespace trn::sim
