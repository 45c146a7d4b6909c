// GpSimdE's general-purpose ops: elementwise, copy, fill, iota, bitcast, reduce (a reducer or a
// region program) and batched
// matmul directly over HBM access patterns (gather/scatter and sort/arg-reduce run in
// gpsimd_indexing.cc and gpsimd_sort.cc). This is where ops without a tiled lowering run, so
// every compute domain (f64 included) is supported here.
#include <cstring>

#include "collectives.h"
#include "elementwise.h"
#include "engines.h"

namespace trn::sim {
namespace {

void RunIota(Machine& machine, const GpIota& g) {
  const StridedView dst = machine.View(g.dst);
  int64_t inner = 1;
  for (int d = g.dim + 1; d < dst.rank; ++d) inner *= dst.count[d];
  const int64_t count = dst.count[g.dim];
  Values index = Values::Make(Domain::kI64, dst.num_elements());
  for (size_t i = 0; i < index.size(); ++i) index.i64[i] = (static_cast<int64_t>(i) / inner) % count;
  Scatter(index, dst);
}

// base + p·partition_step + Σ i_d·free_steps[d] for every element of a tile's view (dims: the
// partition, then the free dims), in row-major order.
Values AffineValues(const StridedView& view, int64_t base, int64_t partition_step,
                    const std::vector<int64_t>& free_steps) {
  Values value = Values::Make(Domain::kI64, view.num_elements());
  std::vector<int64_t> index(view.rank, 0);
  for (size_t i = 0; i < value.size(); ++i) {
    int64_t v = base + index[0] * partition_step;
    for (int d = 1; d < view.rank; ++d) v += index[d] * free_steps[d - 1];
    value.i64[i] = v;
    for (int d = view.rank - 1; d >= 0 && ++index[d] == view.count[d]; --d) index[d] = 0;
  }
  return value;
}

bool CompareWithZero(AluOp op, int64_t v) {
  switch (op) {
    case AluOp::kEq: return v == 0;
    case AluOp::kNe: return v != 0;
    case AluOp::kLt: return v < 0;
    case AluOp::kLe: return v <= 0;
    case AluOp::kGt: return v > 0;
    default: return v >= 0;  // kGe (instruction_rules: a compare)
  }
}

void RunTileIota(Machine& machine, const Iota& t) {
  const StridedView dst = machine.View(t.dst);
  Scatter(AffineValues(dst, t.base, t.partition_step, t.free_steps), dst);
}

void RunAffineSelect(Machine& machine, const AffineSelect& a) {
  const StridedView dst = machine.View(a.dst);
  const Values affine = AffineValues(dst, a.base, a.partition_step, a.free_steps);
  Values x = Gather(machine.View(a.src), ComputeDomain(a.src.dtype));
  const Values fill = ScalarValues(a.fill, x.domain, 1);
  WithDomainType(x.domain, [&](auto tag) {
    using T = decltype(tag);
    T* data = x.data<T>();
    const T value = fill.data<T>()[0];
    for (size_t i = 0; i < x.size(); ++i) {
      if (!CompareWithZero(a.op, affine.i64[i])) data[i] = value;
    }
  });
  Scatter(x, dst);
}

void RunReduce(Machine& machine, const GpReduce& g) {
  const StridedView src = machine.View(g.src);
  int64_t cols = 1;
  for (int d = src.rank - g.reduced; d < src.rank; ++d) cols *= src.count[d];
  const Values x = Gather(src, ComputeDomain(src.dtype));
  const Values init = ScalarValues(g.init, x.domain, 1);
  const int64_t rows = static_cast<int64_t>(x.size()) / cols;
  Scatter(ReduceRows(g.op, x, rows, cols, &init), machine.View(g.dst));
}

// The accumulators start from inits and take the reduced elements one at a time in row-major
// order (XLA's CPU emitter's order), every kept row at once.
void RunRegionReduce(Machine& machine, const GpRegionReduce& g) {
  const size_t n = g.srcs.size();
  const StridedView first = machine.View(g.srcs[0]);
  int64_t cols = 1;
  for (int d = first.rank - g.reduced; d < first.rank; ++d) cols *= first.count[d];
  std::vector<Values> x, acc;
  for (size_t i = 0; i < n; ++i) {
    const StridedView src = machine.View(g.srcs[i]);
    x.push_back(Gather(src, ComputeDomain(src.dtype)));
    acc.push_back(Gather(machine.View(g.inits[i]), ComputeDomain(src.dtype)));
  }
  const int64_t rows = cols ? static_cast<int64_t>(x[0].size()) / cols : 0;
  std::vector<int64_t> at(rows);
  for (int64_t c = 0; c < cols; ++c) {
    for (int64_t r = 0; r < rows; ++r) at[r] = r * cols + c;
    std::vector<Values> args = acc;
    for (size_t i = 0; i < n; ++i) args.push_back(PickElements(x[i], at));
    acc = EvaluateRegion(g.region, args);
  }
  for (size_t i = 0; i < n; ++i) Scatter(acc[i], machine.View(g.dsts[i]));
}

void RunBatchMatmul(Machine& machine, const GpBatchMatmul& g) {
  const StridedView lhs = machine.View(g.lhs), rhs = machine.View(g.rhs);
  const int64_t batch = lhs.count[0], m_size = lhs.count[1], k_size = lhs.count[2], n_size = rhs.count[2];
  const Domain domain = ComputeDomain(lhs.dtype);
  const Values l = Gather(lhs, domain), r = Gather(rhs, domain);
  Values out = Values::Make(domain, batch * m_size * n_size);
  WithDomainType(domain, [&](auto tag) {
    using T = decltype(tag);
    // Integers multiply and add modulo 2^64 (unsigned arithmetic), floats in their domain.
    using Arith = std::conditional_t<std::is_floating_point_v<T>, T, uint64_t>;
    const T* lp = l.data<T>();
    const T* rp = r.data<T>();
    T* op = out.data<T>();
    std::vector<Arith> acc(n_size);
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t m = 0; m < m_size; ++m) {
        std::fill(acc.begin(), acc.end(), Arith{0});
        for (int64_t k = 0; k < k_size; ++k) {
          const Arith w = static_cast<Arith>(lp[(b * m_size + m) * k_size + k]);
          const T* row = rp + (b * k_size + k) * n_size;
          for (int64_t n = 0; n < n_size; ++n) acc[n] += w * static_cast<Arith>(row[n]);
        }
        T* o = op + (b * m_size + m) * n_size;
        for (int64_t n = 0; n < n_size; ++n) o[n] = static_cast<T>(acc[n]);
      }
    }
  });
  Scatter(out, machine.View(g.dst));
}

}  // namespace

void RunGpSimdInstruction(Machine& machine, const Instruction& inst) {
  switch (inst.opcode) {
    case Opcode::kGpElementwise: {
      const auto& g = std::get<GpElementwise>(inst.operands);
      std::vector<StridedView> srcs;
      for (const HbmAP& ap : g.srcs) srcs.push_back(machine.View(ap));
      RunElementwise(g.op, machine.View(g.dst), srcs);
      return;
    }
    case Opcode::kGpCopy: {
      const auto& g = std::get<GpCopy>(inst.operands);
      RunCopy(machine.View(g.dst), machine.View(g.src));
      return;
    }
    case Opcode::kGpFill: {
      const auto& g = std::get<GpFill>(inst.operands);
      const StridedView dst = machine.View(g.dst);
      Scatter(ScalarValues(g.value, ComputeDomain(g.value.dtype), dst.num_elements()), dst);
      return;
    }
    case Opcode::kGpIota:
      return RunIota(machine, std::get<GpIota>(inst.operands));
    case Opcode::kIota:
      return RunTileIota(machine, std::get<Iota>(inst.operands));
    case Opcode::kAffineSelect:
      return RunAffineSelect(machine, std::get<AffineSelect>(inst.operands));
    case Opcode::kGpBitcast: {
      const auto& g = std::get<GpBitcast>(inst.operands);
      std::memmove(machine.hbm[g.dst].data, machine.hbm[g.src].data, machine.hbm[g.src].byte_size);
      return;
    }
    case Opcode::kGpReduce:
      return RunReduce(machine, std::get<GpReduce>(inst.operands));
    case Opcode::kGpRegionReduce:
      return RunRegionReduce(machine, std::get<GpRegionReduce>(inst.operands));
    case Opcode::kGpBatchMatmul:
      return RunBatchMatmul(machine, std::get<GpBatchMatmul>(inst.operands));
    case Opcode::kGpGather:
    case Opcode::kGpScatter:
    case Opcode::kGpRegionScatter:
      return RunGpSimdIndexing(machine, inst);
    case Opcode::kGpSort:
    case Opcode::kGpArgReduce:
    case Opcode::kGpRegionSort:
      return RunGpSimdOrdering(machine, inst);
    case Opcode::kGpConvolution:
      return RunGpConvolution(machine, std::get<GpConvolution>(inst.operands));
    case Opcode::kGpReduceWindow:
    case Opcode::kGpSelectAndScatter:
    case Opcode::kGpRegionReduceWindow:
      return RunGpSimdWindows(machine, inst);
    case Opcode::kPartitionId:
      return RunPartitionId(machine, std::get<PartitionId>(inst.operands));
    default:
      return;  // the loader puts only GpSimd opcodes on the POOL stream
  }
}

}  // namespace trn::sim
