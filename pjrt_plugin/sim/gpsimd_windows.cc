// GpSimdE's sliding-window ops (docs/program-format.md): gp_reduce_window (and
// gp_region_reduce_window, several operands folded by a region program) folds every window of
// a padded, dilated base (pooling, cumulative sums), and gp_select_and_scatter scatters each
// source element onto the position its window selects (the gradient of max pooling). Both follow
// XLA's CPU emitter: positions in the padding or in a base-dilation hole are skipped, windows
// fold in row-major order from init, and every step rounds to the destination dtype, so results
// are bit-for-bit those of a reducer body run element by element.
#include <array>
#include <cstring>
#include <vector>

#include "elementwise.h"
#include "engines.h"

namespace trn::sim {
namespace {

// v rounded to `dtype` (a no-op unless dtype is a float narrower than the compute domain:
// integer wrap-around commutes with add/mul and max/min/and/or/xor never leave the dtype).
void RoundTo(DType dtype, Values& v) {
  if (!IsFloat(dtype) || dtype == DType::kF32 || dtype == DType::kF64 || v.size() == 0) return;
  std::vector<uint8_t> scratch(v.size() * DTypeSize(dtype));
  StridedView view;
  view.base = scratch.data();
  view.dtype = dtype;
  view.rank = 1;
  view.stride_bytes[0] = DTypeSize(dtype);
  view.count[0] = static_cast<int64_t>(v.size());
  Scatter(v, view);
  v = Gather(view, v.domain);
}

// Row-major element strides of a view's own dims.
std::array<int64_t, 9> DenseStrides(const StridedView& view) {
  std::array<int64_t, 9> strides{};
  int64_t step = 1;
  for (int d = view.rank - 1; d >= 0; --d) {
    strides[d] = step;
    step *= view.count[d];
  }
  return strides;
}

// The base coordinate that output position `o` with window offset `k` reads in dim `w`, or -1
// inside the padding or a base-dilation hole.
int64_t BaseCoordinate(const WindowDim& w, int64_t base_count, int64_t o, int64_t k) {
  const int64_t pos = o * w.stride + k * w.window_dilation - w.pad_low;
  if (pos < 0 || pos % w.base_dilation != 0) return -1;
  const int64_t coord = pos / w.base_dilation;
  return coord < base_count ? coord : -1;
}

// For window offset `k` (one per dim): the flat base index each output position reads, or -1.
void WindowIndices(const StridedView& base, const StridedView& out, const std::vector<WindowDim>& windows,
                   const std::array<int64_t, 9>& k, std::vector<int64_t>& index) {
  const std::array<int64_t, 9> strides = DenseStrides(base);
  const int rank = base.rank;
  std::vector<std::vector<int64_t>> part(rank);
  for (int d = 0; d < rank; ++d) {
    part[d].resize(out.count[d]);
    for (int64_t o = 0; o < out.count[d]; ++o) {
      const int64_t c = BaseCoordinate(windows[d], base.count[d], o, k[d]);
      part[d][o] = c < 0 ? -1 : c * strides[d];
    }
  }
  std::array<int64_t, 9> o{};
  for (size_t i = 0; i < index.size(); ++i) {
    int64_t flat = 0;
    for (int d = 0; d < rank && flat >= 0; ++d) flat = part[d][o[d]] < 0 ? -1 : flat + part[d][o[d]];
    index[i] = flat;
    for (int d = rank - 1; d >= 0; --d) {
      if (++o[d] < out.count[d]) break;
      o[d] = 0;
    }
  }
}

// Advances a row-major counter over `counts`; false after the last.
bool Next(std::array<int64_t, 9>& at, const std::vector<WindowDim>& windows) {
  for (int d = static_cast<int>(windows.size()) - 1; d >= 0; --d) {
    if (++at[d] < windows[d].size) return true;
    at[d] = 0;
  }
  return false;
}

void RunReduceWindow(Machine& machine, const GpReduceWindow& g) {
  const StridedView src = machine.View(g.src), dst = machine.View(g.dst);
  const Domain domain = ComputeDomain(src.dtype);
  const Values x = Gather(src, domain);
  const size_t n = static_cast<size_t>(dst.num_elements());
  Values acc = ScalarValues(g.init, domain, n);
  RoundTo(dst.dtype, acc);
  std::vector<int64_t> index(n);
  std::array<int64_t, 9> k{};
  do {
    WindowIndices(src, dst, g.windows, k, index);
    Values step = acc;
    WithDomainType(domain, [&](auto tag) {
      using T = decltype(tag);
      Values column = Values::Uninitialized(domain, n);
      T* col = column.data<T>();
      const T* xs = x.data<T>();
      const T* a = acc.data<T>();
      for (size_t i = 0; i < n; ++i) col[i] = index[i] < 0 ? a[i] : xs[index[i]];
      ApplyBinary(g.op, src.dtype, step, column);
      T* s = step.data<T>();
      for (size_t i = 0; i < n; ++i) {
        if (index[i] < 0) s[i] = a[i];  // skipped: the accumulator stays as it was
      }
    });
    acc = std::move(step);
    RoundTo(dst.dtype, acc);
  } while (Next(k, g.windows));
  Scatter(acc, dst);
}

// RunReduceWindow's fold with a region over several operands: at each window offset, the
// output positions whose tap is a valid base position fold it in; the others keep their value.
void RunRegionReduceWindow(Machine& machine, const GpRegionReduceWindow& g) {
  const size_t n = g.srcs.size();
  const StridedView src = machine.View(g.srcs[0]), dst = machine.View(g.dsts[0]);
  std::vector<Values> x, acc;
  for (size_t i = 0; i < n; ++i) {
    const Domain domain = ComputeDomain(machine.View(g.srcs[i]).dtype);
    x.push_back(Gather(machine.View(g.srcs[i]), domain));
    acc.push_back(Gather(machine.View(g.inits[i]), domain));
  }
  std::vector<int64_t> index(static_cast<size_t>(dst.num_elements())), live, taps;
  std::array<int64_t, 9> k{};
  do {
    WindowIndices(src, dst, g.windows, k, index);
    live.clear();
    taps.clear();
    for (size_t o = 0; o < index.size(); ++o) {
      if (index[o] < 0) continue;
      live.push_back(static_cast<int64_t>(o));
      taps.push_back(index[o]);
    }
    if (live.empty()) continue;
    std::vector<Values> args;
    for (size_t i = 0; i < n; ++i) args.push_back(PickElements(acc[i], live));
    for (size_t i = 0; i < n; ++i) args.push_back(PickElements(x[i], taps));
    const std::vector<Values> out = EvaluateRegion(g.region, args);
    for (size_t i = 0; i < n; ++i) PutElements(acc[i], live, out[i]);
  } while (Next(k, g.windows));
  for (size_t i = 0; i < n; ++i) Scatter(acc[i], machine.View(g.dsts[i]));
}

template <typename T>
bool Keep(AluOp select, T current, T candidate) {
  switch (select) {
    case AluOp::kGe: return current >= candidate;
    case AluOp::kGt: return current > candidate;
    case AluOp::kLe: return current <= candidate;
    default: return current < candidate;  // kLt (the loader admits only these four)
  }
}

// The flat operand index each source element's window selects (-1: its window is all padding).
std::vector<int64_t> SelectPositions(const GpSelectAndScatter& g, const StridedView& operand, const StridedView& source) {
  const Values x = Gather(operand, ComputeDomain(operand.dtype));
  const std::array<int64_t, 9> strides = DenseStrides(operand);
  const int rank = operand.rank;
  std::vector<int64_t> selected(static_cast<size_t>(source.num_elements()), -1);
  WithDomainType(x.domain, [&](auto tag) {
    using T = decltype(tag);
    const T* xs = x.data<T>();
    std::array<int64_t, 9> s{};
    for (int64_t& pick : selected) {
      std::array<int64_t, 9> k{};
      do {
        int64_t flat = 0;
        for (int d = 0; d < rank && flat >= 0; ++d) {
          const int64_t c = BaseCoordinate(g.windows[d], operand.count[d], s[d], k[d]);
          flat = c < 0 ? -1 : flat + c * strides[d];
        }
        if (flat >= 0 && (pick < 0 || !Keep<T>(g.select, xs[pick], xs[flat]))) pick = flat;
      } while (Next(k, g.windows));
      for (int d = rank - 1; d >= 0; --d) {
        if (++s[d] < source.count[d]) break;
        s[d] = 0;
      }
    }
  });
  return selected;
}

void RunSelectAndScatter(Machine& machine, const GpSelectAndScatter& g) {
  const StridedView operand = machine.View(g.operand), source = machine.View(g.source), dst = machine.View(g.dst);
  const std::vector<int64_t> selected = SelectPositions(g, operand, source);
  const Domain domain = ComputeDomain(dst.dtype);
  const Values updates = Gather(source, domain);
  Values out = ScalarValues(g.init, domain, static_cast<size_t>(dst.num_elements()));
  RoundTo(dst.dtype, out);
  // Source elements combine in row-major order. A batch holds elements whose picks are distinct,
  // so combining it at once is the same as one by one; a repeated pick starts the next batch.
  WithDomainType(domain, [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    const T* u = updates.data<T>();
    std::vector<uint8_t> in_batch(out.size(), 0);
    std::vector<size_t> batch;
    auto flush = [&] {
      if (batch.empty()) return;
      Values a = Values::Uninitialized(domain, batch.size()), b = Values::Uninitialized(domain, batch.size());
      for (size_t i = 0; i < batch.size(); ++i) {
        a.data<T>()[i] = o[selected[batch[i]]];
        b.data<T>()[i] = u[batch[i]];
      }
      ApplyBinary(g.op, dst.dtype, a, b);
      RoundTo(dst.dtype, a);
      for (size_t i = 0; i < batch.size(); ++i) {
        o[selected[batch[i]]] = a.data<T>()[i];
        in_batch[selected[batch[i]]] = 0;
      }
      batch.clear();
    };
    for (size_t s = 0; s < selected.size(); ++s) {
      if (selected[s] < 0) continue;
      if (in_batch[selected[s]]) flush();
      in_batch[selected[s]] = 1;
      batch.push_back(s);
    }
    flush();
  });
  Scatter(out, dst);
}

}  // namespace

void RunGpSimdWindows(Machine& machine, const Instruction& inst) {
  if (inst.opcode == Opcode::kGpReduceWindow) return RunReduceWindow(machine, std::get<GpReduceWindow>(inst.operands));
  if (inst.opcode == Opcode::kGpRegionReduceWindow) return RunRegionReduceWindow(machine, std::get<GpRegionReduceWindow>(inst.operands));
  if (inst.opcode == Opcode::kGpSelectAndScatter) return RunSelectAndScatter(machine, std::get<GpSelectAndScatter>(inst.operands));
}

}  // namespace trn::sim
