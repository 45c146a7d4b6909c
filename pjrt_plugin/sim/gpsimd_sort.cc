// GpSimdE's order-dependent reductions: gp_sort (a stable sort of several operands by their
// first keys), gp_region_sort (the same with a comparator region) and gp_arg_reduce (the
// (value, index) reduction JAX emits for argmax/argmin).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "elementwise.h"
#include "engines.h"

namespace trn::sim {
namespace {

// A sort key as an integer whose natural order is the key order: IEEE totalOrder for floats
// (-NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN), optionally after JAX's canonicalisation
// (-0 -> +0, every NaN -> +NaN).
template <typename Float, typename Bits>
int64_t FloatKey(Float x, bool canonical) {
  if (canonical) {
    if (x == Float{0}) x = Float{0};
    if (std::isnan(x)) x = std::numeric_limits<Float>::quiet_NaN();
  }
  Bits bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return static_cast<int64_t>(bits < 0 ? bits ^ std::numeric_limits<Bits>::max() : bits);
}

struct SortKey {
  bool is_unsigned = false;
  std::vector<int64_t> signed_keys;
  std::vector<uint64_t> unsigned_keys;

  // -1, 0, 1 as element a orders before, with, after element b.
  int Compare(size_t a, size_t b) const {
    if (is_unsigned) return (unsigned_keys[a] > unsigned_keys[b]) - (unsigned_keys[a] < unsigned_keys[b]);
    return (signed_keys[a] > signed_keys[b]) - (signed_keys[a] < signed_keys[b]);
  }
};

SortKey MakeKey(const Values& values, bool canonical) {
  SortKey key;
  const size_t n = values.size();
  switch (values.domain) {
    case Domain::kF32:
      key.signed_keys.resize(n);
      for (size_t i = 0; i < n; ++i) key.signed_keys[i] = FloatKey<float, int32_t>(values.f32[i], canonical);
      break;
    case Domain::kF64:
      key.signed_keys.resize(n);
      for (size_t i = 0; i < n; ++i) key.signed_keys[i] = FloatKey<double, int64_t>(values.f64[i], canonical);
      break;
    case Domain::kI64:
      key.signed_keys.assign(values.i64.begin(), values.i64.end());
      break;
    case Domain::kU64:
      key.is_unsigned = true;
      key.unsigned_keys.assign(values.u64.begin(), values.u64.end());
      break;
  }
  return key;
}

void RunSort(Machine& machine, const GpSort& g) {
  std::vector<StridedView> srcs;
  std::vector<Values> data;
  for (const HbmAP& ap : g.srcs) {
    srcs.push_back(machine.View(ap));
    data.push_back(Gather(srcs.back(), ComputeDomain(srcs.back().dtype)));
  }
  std::vector<SortKey> keys;
  for (int k = 0; k < g.num_keys; ++k) keys.push_back(MakeKey(data[k], g.canonical_floats));
  const int64_t length = srcs[0].count[srcs[0].rank - 1];
  const int64_t rows = srcs[0].num_elements() / length;
  std::vector<int64_t> order(static_cast<size_t>(length));
  std::vector<Values> sorted;
  for (const Values& values : data) sorted.push_back(Values::Make(values.domain, values.size()));
  for (int64_t row = 0; row < rows; ++row) {
    const size_t first = static_cast<size_t>(row * length);
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      for (const SortKey& key : keys) {
        const int c = key.Compare(first + a, first + b);
        if (c != 0) return g.descending ? c > 0 : c < 0;
      }
      return false;
    });
    for (size_t i = 0; i < data.size(); ++i) {
      WithDomainType(data[i].domain, [&](auto tag) {
        using T = decltype(tag);
        const T* in = data[i].data<T>() + first;
        T* out = sorted[i].data<T>() + first;
        for (int64_t j = 0; j < length; ++j) out[j] = in[order[j]];
      });
    }
  }
  for (size_t i = 0; i < sorted.size(); ++i) Scatter(sorted[i], machine.View(g.dsts[i]));
}

// A stable bottom-up merge sort of `order` by `before` (an element of the right run moves ahead
// only when it is strictly before the left one). It stays in bounds whatever `before` answers,
// so a comparator region that is no strict weak order gives some permutation, never a crash.
template <typename Before>
void MergeSort(std::vector<int64_t>& order, Before&& before) {
  const size_t n = order.size();
  std::vector<int64_t> merged(n);
  for (size_t width = 1; width < n; width *= 2) {
    for (size_t lo = 0; lo < n; lo += 2 * width) {
      const size_t mid = std::min(lo + width, n), hi = std::min(lo + 2 * width, n);
      size_t l = lo, r = mid, out = lo;
      while (l < mid && r < hi) merged[out++] = before(order[r], order[l]) ? order[r++] : order[l++];
      while (l < mid) merged[out++] = order[l++];
      while (r < hi) merged[out++] = order[r++];
    }
    order.swap(merged);
  }
}

// gp_sort's rows with the comparator region deciding each comparison.
void RunRegionSort(Machine& machine, const GpRegionSort& g) {
  const size_t n = g.srcs.size();
  std::vector<Values> data, sorted;
  for (const HbmAP& ap : g.srcs) {
    const StridedView src = machine.View(ap);
    data.push_back(Gather(src, ComputeDomain(src.dtype)));
    sorted.push_back(Values::Make(data.back().domain, data.back().size()));
  }
  const StridedView first_src = machine.View(g.srcs[0]);
  const int64_t length = first_src.count[first_src.rank - 1];
  const int64_t rows = first_src.num_elements() / length;
  std::vector<int64_t> order(static_cast<size_t>(length)), at(static_cast<size_t>(length));
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t first = row * length;
    std::iota(order.begin(), order.end(), int64_t{0});
    MergeSort(order, [&](int64_t a, int64_t b) {
      std::vector<Values> args;
      for (size_t i = 0; i < n; ++i) args.push_back(PickElements(data[i], {first + a}));
      for (size_t i = 0; i < n; ++i) args.push_back(PickElements(data[i], {first + b}));
      return ConvertValues(EvaluateRegion(g.region, args)[0], Domain::kU64).u64[0] != 0;
    });
    for (int64_t j = 0; j < length; ++j) at[j] = first + order[j];
    for (size_t i = 0; i < n; ++i) {
      const Values row_values = PickElements(data[i], at);
      std::vector<int64_t> to(static_cast<size_t>(length));
      std::iota(to.begin(), to.end(), first);
      PutElements(sorted[i], to, row_values);
    }
  }
  for (size_t i = 0; i < n; ++i) Scatter(sorted[i], machine.View(g.dsts[i]));
}

// Folds each row from (init_value, init_index) in element order with JAX's argmax/argmin body,
// where the accumulator is the body's first operand:
//   keep = acc ▷ x || isnan(acc)                     (▷ is > for max, < for min)
//   value = keep ? acc : x
//   index = keep || (acc == x && acc_i < x_i) ? acc_i : x_i
// so the first NaN wins, and among equal values the smallest index. With select_form, XLA's
// select body (torch_xla's argmax/argmin and max/min(dim)) instead:
//   keep = acc ▷= x                                  (▷= is >= for max, <= for min)
//   value = keep ? acc : x
//   index = acc == x ? min(acc_i, x_i) : keep ? acc_i : x_i
// where a NaN on either side is not kept: a NaN is replaced by the next element.
void RunArgReduce(Machine& machine, const GpArgReduce& g) {
  const StridedView src_value = machine.View(g.src_value), src_index = machine.View(g.src_index);
  int64_t cols = 1;
  for (int d = src_value.rank - g.reduced; d < src_value.rank; ++d) cols *= src_value.count[d];
  const int64_t rows = src_value.num_elements() / cols;
  const Domain value_domain = ComputeDomain(src_value.dtype), index_domain = ComputeDomain(src_index.dtype);
  const Values values = Gather(src_value, value_domain), indices = Gather(src_index, index_domain);
  const Values init_value = ScalarValues(g.init_value, value_domain, 1), init_index = ScalarValues(g.init_index, index_domain, 1);
  Values out_value = Values::Make(value_domain, rows), out_index = Values::Make(index_domain, rows);
  const bool is_max = g.op == AluOp::kMax;
  WithDomainType(value_domain, [&](auto value_tag) {
    using V = decltype(value_tag);
    WithDomainType(index_domain, [&](auto index_tag) {
      using I = decltype(index_tag);
      const V* v = values.data<V>();
      const I* ix = indices.data<I>();
      for (int64_t r = 0; r < rows; ++r) {
        V acc = init_value.data<V>()[0];
        I acc_index = init_index.data<I>()[0];
        for (int64_t c = r * cols; c < (r + 1) * cols; ++c) {
          if (g.select_form) {
            const bool keep = is_max ? acc >= v[c] : acc <= v[c];
            if (acc == v[c]) acc_index = std::min(acc_index, ix[c]);
            else if (!keep) acc_index = ix[c];
            if (!keep) acc = v[c];
            continue;
          }
          bool keep = is_max ? acc > v[c] : acc < v[c];
          if constexpr (std::is_floating_point_v<V>) keep = keep || std::isnan(acc);
          const bool keep_index = keep || (acc == v[c] && acc_index < ix[c]);
          if (!keep) acc = v[c];
          if (!keep_index) acc_index = ix[c];
        }
        out_value.data<V>()[r] = acc;
        out_index.data<I>()[r] = acc_index;
      }
    });
  });
  Scatter(out_value, machine.View(g.dst_value));
  Scatter(out_index, machine.View(g.dst_index));
}

}  // namespace

void RunGpSimdOrdering(Machine& machine, const Instruction& inst) {
  if (inst.opcode == Opcode::kGpSort) return RunSort(machine, std::get<GpSort>(inst.operands));
  if (inst.opcode == Opcode::kGpRegionSort) return RunRegionSort(machine, std::get<GpRegionSort>(inst.operands));
  if (inst.opcode == Opcode::kGpArgReduce) return RunArgReduce(machine, std::get<GpArgReduce>(inst.operands));
}

}  // namespace trn::sim
