// GpSimdE's data-dependent addressing: gp_gather and gp_scatter (and gp_region_scatter, whose
// combiner is a region program) move windows of an HBM access
// pattern whose start coordinates are read at run time from an index tensor. Starts are clamped
// (gather, and scatter in clamp mode) or their window skipped (scatter), exactly as XLA does, so
// no index value can address memory outside the access pattern the loader checked.
#include <algorithm>
#include <array>

#include "engines.h"

namespace trn::sim {
namespace {

// Row n of a [N, ...] view, as a view of rank one less.
StridedView Row(const StridedView& rows, int64_t n) {
  StridedView row;
  row.base = rows.base + n * rows.stride_bytes[0];
  row.dtype = rows.dtype;
  row.rank = rows.rank - 1;
  for (int d = 0; d < row.rank; ++d) {
    row.stride_bytes[d] = rows.stride_bytes[d + 1];
    row.count[d] = rows.count[d + 1];
  }
  return row;
}

// Resolves row n of the index matrix against `base` for windows shaped like `window`: the start
// of each dim in [0, D - S]. Returns false when some start lies outside that range (the caller
// clamps or skips); `starts` holds the clamped starts either way.
bool WindowStarts(const Values& indices, int64_t n, const StridedView& base, const StridedView& window,
                  std::array<int64_t, 9>& starts) {
  bool inside = true;
  for (int d = 0; d < base.rank; ++d) {
    const int64_t limit = base.count[d] - window.count[d];
    const size_t at = static_cast<size_t>(n * base.rank + d);
    if (indices.domain == Domain::kU64) {
      const uint64_t v = indices.u64[at];
      inside &= v <= static_cast<uint64_t>(limit);
      starts[d] = v <= static_cast<uint64_t>(limit) ? static_cast<int64_t>(v) : limit;
    } else {
      const int64_t v = indices.i64[at];
      inside &= v >= 0 && v <= limit;
      starts[d] = std::clamp<int64_t>(v, 0, limit);
    }
  }
  return inside;
}

// The window of `base` at `starts` with `window`'s counts.
StridedView Window(const StridedView& base, const std::array<int64_t, 9>& starts, const StridedView& window) {
  StridedView view = base;
  for (int d = 0; d < base.rank; ++d) {
    view.base += starts[d] * base.stride_bytes[d];
    view.count[d] = window.count[d];
  }
  return view;
}

Values ReadIndices(Machine& machine, const HbmAP& ap) {
  const StridedView view = machine.View(ap);
  return Gather(view, ComputeDomain(view.dtype));
}

void RunGather(Machine& machine, const GpGather& g) {
  const StridedView dst = machine.View(g.dst), src = machine.View(g.src);
  const Values indices = ReadIndices(machine, g.indices);
  const Domain domain = ComputeDomain(src.dtype);
  std::array<int64_t, 9> starts{};
  for (int64_t n = 0; n < dst.count[0]; ++n) {
    const StridedView row = Row(dst, n);
    WindowStarts(indices, n, src, row, starts);
    Scatter(Gather(Window(src, starts, row), domain), row);
  }
}

void RunScatter(Machine& machine, const GpScatter& g) {
  const StridedView dst = machine.View(g.dst), updates = machine.View(g.updates);
  const Values indices = ReadIndices(machine, g.indices);
  const Domain domain = ComputeDomain(dst.dtype);
  std::array<int64_t, 9> starts{};
  // Windows are applied one after another in row order, each read-modify-write rounding to the
  // destination dtype, so duplicate indices combine exactly as a sequential loop would.
  for (int64_t n = 0; n < updates.count[0]; ++n) {
    const StridedView row = Row(updates, n);
    if (!WindowStarts(indices, n, dst, row, starts) && !g.clamp) continue;
    const StridedView target = Window(dst, starts, row);
    Values update = Gather(row, domain);
    if (g.op == AluOp::kCopy) {
      Scatter(update, target);
      continue;
    }
    Values current = Gather(target, domain);
    ApplyBinary(g.op, dst.dtype, current, update);
    Scatter(current, target);
  }
}

// Rows one after another, like RunScatter: each window of every destination becomes the region
// of (its current values..., the update row's values...).
void RunRegionScatter(Machine& machine, const GpRegionScatter& g) {
  const size_t n = g.dsts.size();
  std::vector<StridedView> dsts, updates;
  for (size_t i = 0; i < n; ++i) {
    dsts.push_back(machine.View(g.dsts[i]));
    updates.push_back(machine.View(g.updates[i]));
  }
  const Values indices = ReadIndices(machine, g.indices);
  std::array<int64_t, 9> starts{};
  for (int64_t row = 0; row < updates[0].count[0]; ++row) {
    if (!WindowStarts(indices, row, dsts[0], Row(updates[0], row), starts)) continue;
    std::vector<Values> args;
    std::vector<StridedView> targets;
    for (size_t i = 0; i < n; ++i) {
      targets.push_back(Window(dsts[i], starts, Row(updates[i], row)));
      args.push_back(Gather(targets[i], ComputeDomain(dsts[i].dtype)));
    }
    for (size_t i = 0; i < n; ++i) args.push_back(Gather(Row(updates[i], row), ComputeDomain(dsts[i].dtype)));
    const std::vector<Values> out = EvaluateRegion(g.region, args);
    for (size_t i = 0; i < n; ++i) Scatter(out[i], targets[i]);
  }
}

}  // namespace

void RunGpSimdIndexing(Machine& machine, const Instruction& inst) {
  if (inst.opcode == Opcode::kGpGather) return RunGather(machine, std::get<GpGather>(inst.operands));
  if (inst.opcode == Opcode::kGpScatter) return RunScatter(machine, std::get<GpScatter>(inst.operands));
  if (inst.opcode == Opcode::kGpRegionScatter) return RunRegionScatter(machine, std::get<GpRegionScatter>(inst.operands));
}

}  // namespace trn::sim
