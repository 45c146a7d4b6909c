// GpSimdE's general-purpose convolution (gp_convolution, docs/program-format.md): every
// StableHLO convolution form — any layout through the access patterns, strides, padding
// (negative too), lhs/rhs dilation, feature and batch groups — in the lhs's compute domain.
#include <type_traits>
#include <vector>

#include "engines.h"

namespace trn::sim {
namespace {

// Row-major strides of a count vector.
std::vector<int64_t> DenseStrides(const std::vector<int64_t>& counts) {
  std::vector<int64_t> strides(counts.size(), 1);
  for (int d = static_cast<int>(counts.size()) - 2; d >= 0; --d) strides[d] = strides[d + 1] * counts[d + 1];
  return strides;
}

std::vector<int64_t> SpatialCounts(const StridedView& view) {
  return std::vector<int64_t>(view.count.begin() + 2, view.count.begin() + view.rank);
}

int64_t Product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// One kernel tap that reads real input for an output position: its kernel index and input
// index (both linear over the spatial dims).
struct Tap { int64_t kernel, input; };

// The taps of output position `y` (a multi-index) in kernel row-major order; taps landing on
// padding or between dilated input elements read zero and are left out.
void TapsOf(const GpConvolution& g, const std::vector<int64_t>& y, const std::vector<int64_t>& x_counts,
            const std::vector<int64_t>& k_counts, const std::vector<int64_t>& x_strides, std::vector<Tap>& taps) {
  taps.clear();
  const int dims = static_cast<int>(y.size());
  const int64_t kernel_size = Product(k_counts);
  std::vector<int64_t> k(dims, 0);
  for (int64_t kl = 0; kl < kernel_size; ++kl) {
    int64_t input = 0;
    bool valid = true;
    for (int d = 0; d < dims && valid; ++d) {
      const ConvWindowDim& w = g.window[d];
      const int64_t q = y[d] * w.stride + k[d] * w.rhs_dilation - w.pad_low;  // in the dilated, padded input
      if (q < 0 || q % w.lhs_dilation != 0 || q / w.lhs_dilation >= x_counts[d]) valid = false;
      else input += (q / w.lhs_dilation) * x_strides[d];
    }
    if (valid) taps.push_back({kl, input});
    for (int d = dims - 1; d >= 0; --d) {  // next kernel index, row-major
      if (++k[d] < k_counts[d]) break;
      k[d] = 0;
    }
  }
}

}  // namespace

void RunGpConvolution(Machine& machine, const GpConvolution& g) {
  const StridedView lhs = machine.View(g.lhs), rhs = machine.View(g.rhs), dst = machine.View(g.dst);
  const Domain domain = ComputeDomain(lhs.dtype);
  const Values l = Gather(lhs, domain), r = Gather(rhs, domain);
  const std::vector<int64_t> x_counts = SpatialCounts(lhs), k_counts = SpatialCounts(rhs), y_counts = SpatialCounts(dst);
  const std::vector<int64_t> x_strides = DenseStrides(x_counts);
  const int64_t x_size = Product(x_counts), k_size = Product(k_counts), y_size = Product(y_counts);
  const int64_t n_in = lhs.count[0], c_in = lhs.count[1], n_out = dst.count[0], o_size = rhs.count[0], i_size = rhs.count[1];
  const int64_t o_per_feature_group = o_size / g.feature_groups, o_per_batch_group = o_size / g.batch_groups;
  const int64_t n_per_batch_group = n_in / g.batch_groups;
  Values out = Values::Make(domain, n_out * o_size * y_size);
  const int dims = static_cast<int>(y_counts.size());
  WithDomainType(domain, [&](auto tag) {
    using T = decltype(tag);
    // Integers multiply and add modulo 2^64, floats in their domain (fp32 for f32/bf16/f16/fp8).
    using Arith = std::conditional_t<std::is_floating_point_v<T>, T, uint64_t>;
    const T* lp = l.data<T>();
    const T* rp = r.data<T>();
    T* op = out.data<T>();
    std::vector<Tap> taps;
    std::vector<int64_t> y(dims, 0);
    for (int64_t yl = 0; yl < y_size; ++yl) {
      TapsOf(g, y, x_counts, k_counts, x_strides, taps);
      for (int64_t n = 0; n < n_out; ++n) {
        for (int64_t o = 0; o < o_size; ++o) {
          const int64_t c_first = (o / o_per_feature_group) * i_size;
          const int64_t batch = (o / o_per_batch_group) * n_per_batch_group + n;
          const T* lb = lp + (batch * c_in + c_first) * x_size;
          const T* rb = rp + o * i_size * k_size;
          Arith acc{0};
          for (int64_t i = 0; i < i_size; ++i) {
            for (const Tap& t : taps) acc += static_cast<Arith>(lb[i * x_size + t.input]) * static_cast<Arith>(rb[i * k_size + t.kernel]);
          }
          op[(n * o_size + o) * y_size + yl] = static_cast<T>(acc);
        }
      }
      for (int d = dims - 1; d >= 0; --d) {  // next output index, row-major
        if (++y[d] < y_counts[d]) break;
        y[d] = 0;
      }
    }
  });
  Scatter(out, dst);
}

}  // namespace trn::sim
