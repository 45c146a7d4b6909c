// The per-opcode rules of docs/program-format.md that go beyond one operand's own validity:
// engine constraints (matmul shapes and PSUM banks), paired element counts, op/dtype agreement,
// and that no instruction writes a parameter or a constant.
#include <limits>
#include <string>

#include "program_loader.h"

namespace trn::sim {
namespace {

std::string Shape(const TileAP& ap) {
  std::string text(1, '[');
  return text + std::to_string(ap.partition_count) + " partitions, " + std::to_string(ap.free_size()) + "]";
}

Status SameCount(const char* what, int64_t a, int64_t b) {
  if (a == b) return Status::Ok();
  return InvalidArgument(std::string(what) + ": element counts differ (" + std::to_string(a) + " vs " + std::to_string(b) + ")");
}

Status SameTileShape(const TileAP& dst, const TileAP& src) {
  if (dst.partition_count != src.partition_count || dst.free_size() != src.free_size()) {
    return InvalidArgument("operand shapes differ: " + Shape(dst) + " vs " + Shape(src));
  }
  return Status::Ok();
}

Status Writable(const Program& program, uint32_t tensor) {
  const Tensor& t = program.tensors[tensor];
  if (t.kind == TensorKind::kParameter || t.kind == TensorKind::kConstant) {
    return InvalidArgument("writes " + std::string(t.kind == TensorKind::kParameter ? "parameter" : "constant") + " tensor " +
                           std::to_string(tensor) + " (" + t.name + ")");
  }
  return Status::Ok();
}

DType HbmDType(const Program& program, const HbmAP& ap) { return program.tensors[ap.tensor].dtype; }

Status PerPartitionScalar(const ScalarOperand& s, const TileAP& src) {
  if (!s.is_tile) return Status::Ok();
  if (s.tile.partition_count != src.partition_count || s.tile.free_size() != 1) {
    return InvalidArgument("per-partition scalar must be [" + std::to_string(src.partition_count) + ", 1], got " + Shape(s.tile));
  }
  return Status::Ok();
}

// bn_stats reads at most 512 elements per partition (NKI's nl.tile_size.bn_stats_fmax).
constexpr int64_t kBnStatsFreeMax = 512;

// bn_stats / bn_aggr: float tiles, dst [P, dst_size] on src's partitions, src 1 to src_max
// elements per partition.
Status BatchNormStatistics(const char* what, const TileAP& dst, const TileAP& src, int64_t dst_size, int64_t src_max) {
  if (!IsFloat(src.dtype) || !IsFloat(dst.dtype) || src.dtype == DType::kF64 || dst.dtype == DType::kF64) {
    return InvalidArgument(std::string(what) + " computes in fp32: src " + DTypeName(src.dtype) + " and dst " + DTypeName(dst.dtype) + " must be f32, bf16, f16 or fp8");
  }
  if (dst.partition_count != src.partition_count || dst.free_size() != dst_size) {
    return InvalidArgument(std::string(what) + " dst must be [" + std::to_string(src.partition_count) + ", " + std::to_string(dst_size) + "], got " + Shape(dst));
  }
  if (src.free_size() < 1 || src.free_size() > src_max) {
    return InvalidArgument(std::string(what) + " src " + Shape(src) + " must have 1 to " + std::to_string(src_max) + " elements per partition");
  }
  return Status::Ok();
}

bool IsMatmulDType(DType t) {
  return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16 || t == DType::kF8E4M3FN || t == DType::kF8E5M2;
}

Status CheckMatmul(const Program& program, const Matmul& m) {
  const TargetSpec& target = *program.target;
  if (m.dst.memory != Memory::kPsum || m.dst.dtype != DType::kF32) return InvalidArgument("dst must be an fp32 PSUM tile");
  if (m.stationary.memory != Memory::kSbuf || m.moving.memory != Memory::kSbuf) return InvalidArgument("stationary and moving must be in SBUF");
  if (!IsMatmulDType(m.stationary.dtype) || !IsMatmulDType(m.moving.dtype)) {
    return InvalidArgument("inputs are " + DTypeName(m.stationary.dtype) + " and " + DTypeName(m.moving.dtype) + "; TensorE multiplies f32, bf16, f16 and fp8");
  }
  if (m.stationary.partition_count != m.moving.partition_count) {
    return InvalidArgument("stationary has K=" + std::to_string(m.stationary.partition_count) + " partitions, moving K=" + std::to_string(m.moving.partition_count));
  }
  const int64_t cols = m.stationary.free_size(), n = m.moving.free_size();
  if (cols > target.matmul_stationary_free_max) return InvalidArgument("stationary free size " + std::to_string(cols) + " exceeds " + std::to_string(target.matmul_stationary_free_max));
  if (n > target.matmul_moving_free_max) return InvalidArgument("moving free size " + std::to_string(n) + " exceeds " + std::to_string(target.matmul_moving_free_max) + " on " + target.name);
  if (m.dst.partition_count != cols || m.dst.free_size() != n) {
    return InvalidArgument("dst is " + Shape(m.dst) + ", expected [" + std::to_string(cols) + " partitions, " + std::to_string(n) + "]");
  }
  int64_t low = 0, high = 0;
  for (int d = 0; d < m.dst.num_free; ++d) {
    const int64_t extent = static_cast<int64_t>(m.dst.free[d].stride) * (m.dst.free[d].count - 1);
    (extent < 0 ? low : high) += extent;
  }
  const int64_t first = m.dst.byte_offset + low * 4, last = m.dst.byte_offset + high * 4 + 3;
  if (first / target.psum_bank_bytes != last / target.psum_bank_bytes) {
    return InvalidArgument("dst bytes [" + std::to_string(first) + ", " + std::to_string(last + 1) + "] cross a PSUM bank boundary");
  }
  return Status::Ok();
}

std::string Dims(const HbmAP& ap) {
  std::string text = "[";
  for (int d = 0; d < ap.num_dims; ++d) text += (d ? ", " : "") + std::to_string(ap.dims[d].count);
  return text + "]";
}

bool SameDims(const HbmAP& a, const HbmAP& b) {
  if (a.num_dims != b.num_dims) return false;
  for (int d = 0; d < a.num_dims; ++d) {
    if (a.dims[d].count != b.dims[d].count) return false;
  }
  return true;
}

Status IntegerIndices(const Program& program, const HbmAP& ap, const char* what) {
  const DType t = HbmDType(program, ap);
  if (IsFloat(t) || t == DType::kPred) return InvalidArgument(std::string(what) + " must be an integer tensor, got " + DTypeName(t));
  return Status::Ok();
}

// rows [N, S0..S(r-1)] of windows into base [D0..D(r-1)] at indices [N, r]: gp_gather and gp_scatter.
Status CheckWindows(const Program& program, const HbmAP& rows, const HbmAP& base, const HbmAP& indices) {
  TRN_RETURN_IF_ERROR(IntegerIndices(program, indices, "indices"));
  const int rank = base.num_dims;
  if (rows.num_dims != rank + 1 || indices.num_dims != 2 || indices.dims[1].count != rank || indices.dims[0].count != rows.dims[0].count) {
    return InvalidArgument("windows " + Dims(rows) + " and indices " + Dims(indices) + " do not fit a " + std::to_string(rank) +
                           "-D base (expected [N, S0..S" + std::to_string(rank - 1) + "] and [N, " + std::to_string(rank) + "])");
  }
  for (int d = 0; d < rank; ++d) {
    if (rows.dims[d + 1].count > base.dims[d].count) return InvalidArgument("window " + Dims(rows) + " exceeds the base " + Dims(base) + " in dim " + std::to_string(d));
  }
  return Status::Ok();
}

// docs/multi-device.md: dst and src share the dtype; their element counts and dims agree as
// the kind requires for a group of n; groups are disjoint, permute's sources and targets distinct.
Status CheckCollective(const Program& program, const Collective& c) {
  TRN_RETURN_IF_ERROR(Writable(program, c.dst.tensor));
  if (HbmDType(program, c.dst) != HbmDType(program, c.src)) return InvalidArgument("collective: dst and src dtypes differ");
  const bool reduces = c.kind == kCollectiveAllReduce || c.kind == kCollectiveReduceScatter;
  if (reduces) {
    const bool combines = c.op == AluOp::kAdd || c.op == AluOp::kMul || c.op == AluOp::kMax || c.op == AluOp::kMin ||
                          c.op == AluOp::kAnd || c.op == AluOp::kOr || c.op == AluOp::kXor;
    if (!combines) return InvalidArgument(AluOpName(c.op) + " is not a collective combiner (add, mul, max, min, and, or, xor)");
    TRN_RETURN_IF_ERROR(CheckAluOp(static_cast<uint8_t>(c.op), 2, HbmDType(program, c.dst)));
  }
  if (c.algorithm == kCollectiveHalvingDoubling && c.kind != kCollectiveAllReduce && c.kind != kCollectiveAllGather && c.kind != kCollectiveReduceScatter) return InvalidArgument("recursive halving-doubling is an all_reduce, all_gather or reduce_scatter algorithm");
  if (c.algorithm == kCollectiveHierarchical && c.kind != kCollectiveAllReduce) return InvalidArgument("the hierarchical algorithm is an all_reduce algorithm");
  if (c.kind == kCollectivePermute) {
    if (!c.groups.empty()) return InvalidArgument("collective_permute takes pairs, not replica groups");
    std::vector<int64_t> sources, targets;
    for (const auto& [s, t] : c.pairs) {
      if (std::find(sources.begin(), sources.end(), s) != sources.end() || std::find(targets.begin(), targets.end(), t) != targets.end()) {
        return InvalidArgument("collective_permute names core " + std::to_string(s) + " or " + std::to_string(t) + " twice");
      }
      sources.push_back(s);
      targets.push_back(t);
    }
    return SameCount("collective_permute", c.dst.num_elements(), c.src.num_elements());
  }
  if (c.groups.empty()) return InvalidArgument("collective without replica groups");
  std::vector<int64_t> seen;
  for (const auto& group : c.groups) {
    for (int64_t r : group) {
      if (std::find(seen.begin(), seen.end(), r) != seen.end()) return InvalidArgument("collective replica groups name core " + std::to_string(r) + " twice");
      seen.push_back(r);
    }
  }
  const int64_t n = static_cast<int64_t>(c.groups[0].size());
  if (c.algorithm == kCollectiveHalvingDoubling && (n & (n - 1)) != 0) return InvalidArgument("recursive halving-doubling needs a power-of-two group, not " + std::to_string(n) + " cores");
  const bool along_dim = c.kind == kCollectiveAllGather || c.kind == kCollectiveReduceScatter || c.kind == kCollectiveAllToAll;
  if (along_dim) {
    const HbmAP& split = c.kind == kCollectiveAllGather ? c.dst : c.src;
    if (c.dim >= c.src.num_dims || c.dim >= c.dst.num_dims || c.concat_dim >= c.dst.num_dims) return InvalidArgument("collective dim out of range");
    if (split.dims[c.dim].count % n != 0) return InvalidArgument("collective dim " + std::to_string(c.dim) + " of size " + std::to_string(split.dims[c.dim].count) + " does not split into " + std::to_string(n));
  }
  switch (c.kind) {
    case kCollectiveAllGather: return SameCount("all_gather dst vs n x src", c.dst.num_elements(), n * c.src.num_elements());
    case kCollectiveReduceScatter: return SameCount("reduce_scatter n x dst vs src", n * c.dst.num_elements(), c.src.num_elements());
    default: return SameCount(c.kind == kCollectiveAllToAll ? "all_to_all" : "collective", c.dst.num_elements(), c.src.num_elements());
  }
}

Status CheckDataDependent(const Program& program, const Instruction& inst) {
  switch (inst.opcode) {
    case Opcode::kGpGather: {
      const auto& g = std::get<GpGather>(inst.operands);
      TRN_RETURN_IF_ERROR(Writable(program, g.dst.tensor));
      return CheckWindows(program, g.dst, g.src, g.indices);
    }
    case Opcode::kGpScatter: {
      const auto& g = std::get<GpScatter>(inst.operands);
      TRN_RETURN_IF_ERROR(Writable(program, g.dst.tensor));
      const bool combines = g.op == AluOp::kAdd || g.op == AluOp::kMax || g.op == AluOp::kMin || g.op == AluOp::kMul;
      if (!combines && g.op != AluOp::kCopy) return InvalidArgument(AluOpName(g.op) + " is not a scatter combiner (copy, add, max, min, mul)");
      if (combines) TRN_RETURN_IF_ERROR(CheckAluOp(static_cast<uint8_t>(g.op), 2, HbmDType(program, g.dst)));
      return CheckWindows(program, g.updates, g.dst, g.indices);
    }
    case Opcode::kGpArgReduce: {
      const auto& g = std::get<GpArgReduce>(inst.operands);
      TRN_RETURN_IF_ERROR(Writable(program, g.dst_value.tensor));
      TRN_RETURN_IF_ERROR(Writable(program, g.dst_index.tensor));
      if (g.op != AluOp::kMax && g.op != AluOp::kMin) return InvalidArgument(AluOpName(g.op) + " is not an arg-reduction (max, min)");
      TRN_RETURN_IF_ERROR(IntegerIndices(program, g.src_index, "the index operand"));
      if (!SameDims(g.src_value, g.src_index)) return InvalidArgument("value dims " + Dims(g.src_value) + " differ from index dims " + Dims(g.src_index));
      if (g.reduced > g.src_value.num_dims) return InvalidArgument("reduces " + std::to_string(g.reduced) + " of " + std::to_string(g.src_value.num_dims) + " dims");
      int64_t kept = 1;
      for (int d = 0; d < g.src_value.num_dims - g.reduced; ++d) kept *= g.src_value.dims[d].count;
      TRN_RETURN_IF_ERROR(SameCount("gp_arg_reduce dst_value vs kept source dims", g.dst_value.num_elements(), kept));
      return SameCount("gp_arg_reduce dst_index vs kept source dims", g.dst_index.num_elements(), kept);
    }
    case Opcode::kGpSort: {
      const auto& g = std::get<GpSort>(inst.operands);
      if (g.srcs.empty() || g.dsts.size() != g.srcs.size()) {
        return InvalidArgument(std::to_string(g.dsts.size()) + " destinations for " + std::to_string(g.srcs.size()) + " sources");
      }
      if (g.num_keys < 1 || g.num_keys > static_cast<int>(g.srcs.size())) {
        return InvalidArgument("key count " + std::to_string(g.num_keys) + " with " + std::to_string(g.srcs.size()) + " operands");
      }
      for (size_t i = 0; i < g.srcs.size(); ++i) {
        TRN_RETURN_IF_ERROR(Writable(program, g.dsts[i].tensor));
        if (!SameDims(g.srcs[i], g.srcs[0]) || !SameDims(g.dsts[i], g.srcs[0])) {
          return InvalidArgument("operand " + std::to_string(i) + " has dims other than " + Dims(g.srcs[0]));
        }
        if (HbmDType(program, g.dsts[i]) != HbmDType(program, g.srcs[i])) return InvalidArgument("operand " + std::to_string(i) + ": destination dtype differs from the source's");
      }
      return Status::Ok();
    }
    default:
      return Status::Ok();
  }
}

// gp_convolution: lhs [N, C, X...], rhs [O, I, K...], dst [N / batch_groups, O, Y...].
Status CheckConvolution(const Program& program, const GpConvolution& g) {
  TRN_RETURN_IF_ERROR(Writable(program, g.dst.tensor));
  const int rank = g.lhs.num_dims;
  if (rank < 2 || g.rhs.num_dims != rank || g.dst.num_dims != rank) {
    return InvalidArgument("lhs, rhs and dst must have the same rank >= 2 ([batch, feature, spatial...])");
  }
  if (static_cast<int>(g.window.size()) != rank - 2) {
    return InvalidArgument("window has " + std::to_string(g.window.size()) + " dims; the operands have " + std::to_string(rank - 2) + " spatial dims");
  }
  const DType lt = HbmDType(program, g.lhs), rt = HbmDType(program, g.rhs);
  if (IsFloat(lt) != IsFloat(rt) || lt == DType::kPred || rt == DType::kPred) {
    return InvalidArgument("lhs " + DTypeName(lt) + " and rhs " + DTypeName(rt) + " must both be float or both integer");
  }
  const int64_t fg = g.feature_groups, bg = g.batch_groups;
  if (fg < 1 || bg < 1 || (fg > 1 && bg > 1)) return InvalidArgument("group counts must be >= 1 and at most one of them > 1");
  const int64_t n = g.lhs.dims[0].count, c = g.lhs.dims[1].count, o = g.rhs.dims[0].count, i = g.rhs.dims[1].count;
  if (c != i * fg || o % fg != 0 || o % bg != 0 || n % bg != 0) {
    return InvalidArgument("features do not divide into groups: lhs [" + std::to_string(n) + ", " + std::to_string(c) + "], rhs [" +
                           std::to_string(o) + ", " + std::to_string(i) + "], feature_groups " + std::to_string(fg) + ", batch_groups " + std::to_string(bg));
  }
  if (g.dst.dims[0].count != n / bg || g.dst.dims[1].count != o) {
    return InvalidArgument("dst must be [" + std::to_string(n / bg) + ", " + std::to_string(o) + ", ...]");
  }
  for (const ConvWindowDim& d : g.window) {
    if (d.stride < 1 || d.lhs_dilation < 1 || d.rhs_dilation < 1) return InvalidArgument("strides and dilations must be >= 1");
    constexpr int64_t kMaxWindowValue = int64_t{1} << 48;  // keeps index arithmetic inside int64
    if (d.stride > kMaxWindowValue || d.lhs_dilation > kMaxWindowValue || d.rhs_dilation > kMaxWindowValue ||
        d.pad_low > kMaxWindowValue || d.pad_low < -kMaxWindowValue) {
      return InvalidArgument("window values must lie within +-2^48");
    }
  }
  return Status::Ok();
}

// The window positions along one dim: (padded dilated base - dilated window) / stride + 1, or 0
// when the window does not fit. __int128 because base * dilation may pass 2^63.
int64_t WindowPositions(int64_t base, const WindowDim& w) {
  const __int128 padded = static_cast<__int128>(base - 1) * w.base_dilation + 1 + w.pad_low + w.pad_high;
  const __int128 span = static_cast<__int128>(w.size - 1) * w.window_dilation + 1;
  if (padded < span) return 0;
  const __int128 n = (padded - span) / w.stride + 1;
  return n > (int64_t{1} << 48) ? -1 : static_cast<int64_t>(n);
}

// `out` must be the window positions of `base` under `windows`, dim by dim.
Status CheckWindowShape(const HbmAP& base, const HbmAP& out, const std::vector<WindowDim>& windows, const char* what) {
  if (static_cast<int>(windows.size()) != base.num_dims || out.num_dims != base.num_dims) {
    return InvalidArgument("window has " + std::to_string(windows.size()) + " dims for a " + std::to_string(base.num_dims) + "-D base and a " +
                           std::to_string(out.num_dims) + "-D " + what);
  }
  for (int d = 0; d < base.num_dims; ++d) {
    const int64_t expected = WindowPositions(base.dims[d].count, windows[d]);
    if (out.dims[d].count != expected) {
      return InvalidArgument(std::string(what) + " " + Dims(out) + " does not match the " + std::to_string(expected) + " window positions of base " +
                             Dims(base) + " in dim " + std::to_string(d));
    }
  }
  return Status::Ok();
}

Status CheckReduceWindow(const Program& program, const GpReduceWindow& g) {
  TRN_RETURN_IF_ERROR(Writable(program, g.dst.tensor));
  const DType dtype = HbmDType(program, g.src);
  if (HbmDType(program, g.dst) != dtype) return InvalidArgument("dst is " + DTypeName(HbmDType(program, g.dst)) + ", src " + DTypeName(dtype));
  TRN_RETURN_IF_ERROR(CheckAluOp(static_cast<uint8_t>(g.op), 2, dtype));
  if (!IsReduceOp(g.op)) return InvalidArgument(AluOpName(g.op) + " is not a reduction");
  return CheckWindowShape(g.src, g.dst, g.windows, "dst");
}

Status CheckSelectAndScatter(const Program& program, const GpSelectAndScatter& g) {
  TRN_RETURN_IF_ERROR(Writable(program, g.dst.tensor));
  const bool compare = g.select == AluOp::kGe || g.select == AluOp::kGt || g.select == AluOp::kLe || g.select == AluOp::kLt;
  if (!compare) return InvalidArgument(AluOpName(g.select) + " is not a window selector (ge, gt, le, lt)");
  const bool combines = g.op == AluOp::kAdd || g.op == AluOp::kMax || g.op == AluOp::kMin || g.op == AluOp::kMul;
  if (!combines) return InvalidArgument(AluOpName(g.op) + " is not a scatter combiner (add, max, min, mul)");
  const DType dtype = HbmDType(program, g.dst);
  if (HbmDType(program, g.source) != dtype) return InvalidArgument("dst is " + DTypeName(dtype) + ", source " + DTypeName(HbmDType(program, g.source)));
  TRN_RETURN_IF_ERROR(CheckAluOp(static_cast<uint8_t>(g.op), 2, dtype));
  if (!SameDims(g.dst, g.operand)) return InvalidArgument("dst " + Dims(g.dst) + " and operand " + Dims(g.operand) + " differ");
  for (const WindowDim& w : g.windows) {
    if (w.base_dilation != 1 || w.window_dilation != 1) return InvalidArgument("select_and_scatter windows have no dilation");
  }
  return CheckWindowShape(g.operand, g.source, g.windows, "source");
}

// A region over n operands takes 2n arguments (the accumulators, then the elements) of the
// operands' dtypes and returns `results` values: the operands' dtypes (n) or one pred (a sort).
Status CheckRegionOperands(const Program& program, const RegionProgram& region, const std::vector<HbmAP>& dsts,
                           const std::vector<HbmAP>& srcs, bool comparator) {
  const size_t n = srcs.size();
  if (n == 0 || dsts.size() != n) return InvalidArgument(std::to_string(dsts.size()) + " destinations for " + std::to_string(n) + " sources");
  if (region.args.size() != 2 * n) return InvalidArgument("the region takes " + std::to_string(region.args.size()) + " arguments for " + std::to_string(n) + " operands");
  if (region.results.size() != (comparator ? 1 : n)) return InvalidArgument("the region returns " + std::to_string(region.results.size()) + " values");
  if (comparator && region.RegisterDType(region.results[0]) != DType::kPred) return InvalidArgument("a comparator region must return pred");
  for (size_t i = 0; i < n; ++i) {
    TRN_RETURN_IF_ERROR(Writable(program, dsts[i].tensor));
    const DType dtype = HbmDType(program, srcs[i]);
    const bool typed = HbmDType(program, dsts[i]) == dtype && region.args[i] == dtype && region.args[n + i] == dtype &&
                       (comparator || region.RegisterDType(region.results[i]) == dtype);
    if (!typed) return InvalidArgument("operand " + std::to_string(i) + " (" + DTypeName(dtype) + "): the region's or destination's dtype differs");
  }
  return Status::Ok();
}

Status CheckRegionOp(const Program& program, const Instruction& inst) {
  switch (inst.opcode) {
    case Opcode::kGpRegionReduce: {
      const auto& g = std::get<GpRegionReduce>(inst.operands);
      TRN_RETURN_IF_ERROR(CheckRegionOperands(program, g.region, g.dsts, g.srcs, false));
      if (g.inits.size() != g.srcs.size()) return InvalidArgument(std::to_string(g.inits.size()) + " inits for " + std::to_string(g.srcs.size()) + " sources");
      for (size_t i = 0; i < g.srcs.size(); ++i) {
        if (!SameDims(g.srcs[i], g.srcs[0])) return InvalidArgument("source " + std::to_string(i) + " has dims other than " + Dims(g.srcs[0]));
        if (g.reduced > g.srcs[i].num_dims) return InvalidArgument("reduces " + std::to_string(g.reduced) + " of " + std::to_string(g.srcs[i].num_dims) + " dims");
        int64_t kept = 1;
        for (int d = 0; d < g.srcs[i].num_dims - g.reduced; ++d) kept *= g.srcs[i].dims[d].count;
        TRN_RETURN_IF_ERROR(SameCount("gp_region_reduce dst vs kept source dims", g.dsts[i].num_elements(), kept));
        TRN_RETURN_IF_ERROR(SameCount("gp_region_reduce init vs dst", g.inits[i].num_elements(), kept));
        if (HbmDType(program, g.inits[i]) != HbmDType(program, g.srcs[i])) return InvalidArgument("init " + std::to_string(i) + " has another dtype");
      }
      return Status::Ok();
    }
    case Opcode::kGpRegionReduceWindow: {
      const auto& g = std::get<GpRegionReduceWindow>(inst.operands);
      TRN_RETURN_IF_ERROR(CheckRegionOperands(program, g.region, g.dsts, g.srcs, false));
      if (g.inits.size() != g.srcs.size()) return InvalidArgument(std::to_string(g.inits.size()) + " inits for " + std::to_string(g.srcs.size()) + " sources");
      for (size_t i = 0; i < g.srcs.size(); ++i) {
        if (!SameDims(g.srcs[i], g.srcs[0]) || !SameDims(g.dsts[i], g.dsts[0]) || !SameDims(g.inits[i], g.dsts[0])) {
          return InvalidArgument("operand " + std::to_string(i) + " has dims other than operand 0's");
        }
        if (HbmDType(program, g.inits[i]) != HbmDType(program, g.srcs[i])) return InvalidArgument("init " + std::to_string(i) + " has another dtype");
      }
      return CheckWindowShape(g.srcs[0], g.dsts[0], g.windows, "dst");
    }
    case Opcode::kGpRegionScatter: {
      const auto& g = std::get<GpRegionScatter>(inst.operands);
      TRN_RETURN_IF_ERROR(CheckRegionOperands(program, g.region, g.dsts, g.updates, false));
      for (size_t i = 0; i < g.dsts.size(); ++i) {
        if (!SameDims(g.dsts[i], g.dsts[0]) || !SameDims(g.updates[i], g.updates[0])) return InvalidArgument("operand " + std::to_string(i) + " has dims other than operand 0's");
      }
      return CheckWindows(program, g.updates[0], g.dsts[0], g.indices);
    }
    default: {  // kGpRegionSort
      const auto& g = std::get<GpRegionSort>(inst.operands);
      TRN_RETURN_IF_ERROR(CheckRegionOperands(program, g.region, g.dsts, g.srcs, true));
      for (size_t i = 0; i < g.srcs.size(); ++i) {
        if (!SameDims(g.srcs[i], g.srcs[0]) || !SameDims(g.dsts[i], g.srcs[0])) return InvalidArgument("operand " + std::to_string(i) + " has dims other than " + Dims(g.srcs[0]));
      }
      return Status::Ok();
    }
  }
}

Status CheckGp(const Program& program, const Instruction& inst) {
  switch (inst.opcode) {
    case Opcode::kGpElementwise: {
      const auto& g = std::get<GpElementwise>(inst.operands);
      TRN_RETURN_IF_ERROR(Writable(program, g.dst.tensor));
      if (g.srcs.empty()) return InvalidArgument("no sources");
      const bool ternary_data = g.op == AluOp::kSelect || g.op == AluOp::kClamp;
      const HbmAP& data = ternary_data && g.srcs.size() > 1 ? g.srcs[1] : g.srcs[0];
      TRN_RETURN_IF_ERROR(CheckAluOp(static_cast<uint8_t>(g.op), static_cast<int>(g.srcs.size()), HbmDType(program, data)));
      for (const HbmAP& src : g.srcs) {
        bool same = src.num_dims == g.dst.num_dims;
        for (int d = 0; same && d < src.num_dims; ++d) same = src.dims[d].count == g.dst.dims[d].count;
        if (!same) return InvalidArgument("source dims differ from the destination's");
      }
      return Status::Ok();
    }
    case Opcode::kGpCopy: {
      const auto& g = std::get<GpCopy>(inst.operands);
      TRN_RETURN_IF_ERROR(Writable(program, g.dst.tensor));
      return SameCount("gp_copy", g.dst.num_elements(), g.src.num_elements());
    }
    case Opcode::kGpFill:
      return Writable(program, std::get<GpFill>(inst.operands).dst.tensor);
    case Opcode::kGpIota: {
      const auto& g = std::get<GpIota>(inst.operands);
      TRN_RETURN_IF_ERROR(Writable(program, g.dst.tensor));
      if (g.dim >= g.dst.num_dims) return InvalidArgument("iota dim " + std::to_string(g.dim) + " of " + std::to_string(g.dst.num_dims) + " dims");
      return Status::Ok();
    }
    case Opcode::kIota: {
      const auto& t = std::get<Iota>(inst.operands);
      if (t.free_steps.size() != static_cast<size_t>(t.dst.num_free)) {
        return InvalidArgument(std::to_string(t.free_steps.size()) + " free steps for " + std::to_string(t.dst.num_free) + " free dims");
      }
      if (t.dst.dtype == DType::kF64 || t.dst.dtype == DType::kC64) return InvalidArgument("iota writes an integer or a float tile, not " + DTypeName(t.dst.dtype));
      return Status::Ok();
    }
    case Opcode::kAffineSelect: {
      const auto& a = std::get<AffineSelect>(inst.operands);
      if (a.op < AluOp::kEq || a.op > AluOp::kGe) return InvalidArgument(AluOpName(a.op) + " is not a compare");
      if (a.free_steps.size() != static_cast<size_t>(a.dst.num_free)) {
        return InvalidArgument(std::to_string(a.free_steps.size()) + " free steps for " + std::to_string(a.dst.num_free) + " free dims");
      }
      if (a.dst.dtype != a.src.dtype) return InvalidArgument("dst is " + DTypeName(a.dst.dtype) + ", src " + DTypeName(a.src.dtype));
      return SameTileShape(a.dst, a.src);
    }
    case Opcode::kGpBitcast: {
      const auto& g = std::get<GpBitcast>(inst.operands);
      TRN_RETURN_IF_ERROR(Writable(program, g.dst));
      if (program.tensors[g.dst].byte_size != program.tensors[g.src].byte_size) {
        return InvalidArgument("tensors hold " + std::to_string(program.tensors[g.dst].byte_size) + " and " +
                               std::to_string(program.tensors[g.src].byte_size) + " bytes");
      }
      return Status::Ok();
    }
    case Opcode::kGpReduce: {
      const auto& g = std::get<GpReduce>(inst.operands);
      TRN_RETURN_IF_ERROR(Writable(program, g.dst.tensor));
      TRN_RETURN_IF_ERROR(CheckAluOp(static_cast<uint8_t>(g.op), 2, HbmDType(program, g.src)));
      if (!IsReduceOp(g.op)) return InvalidArgument(AluOpName(g.op) + " is not a reduction");
      if (g.reduced > g.src.num_dims) return InvalidArgument("reduces " + std::to_string(g.reduced) + " of " + std::to_string(g.src.num_dims) + " dims");
      int64_t kept = 1;
      for (int d = 0; d < g.src.num_dims - g.reduced; ++d) kept *= g.src.dims[d].count;
      return SameCount("gp_reduce dst vs kept source dims", g.dst.num_elements(), kept);
    }
    case Opcode::kGpBatchMatmul: {
      const auto& g = std::get<GpBatchMatmul>(inst.operands);
      TRN_RETURN_IF_ERROR(Writable(program, g.dst.tensor));
      if (g.dst.num_dims != 3 || g.lhs.num_dims != 3 || g.rhs.num_dims != 3) return InvalidArgument("access patterns must be 3-D");
      const auto &l = g.lhs.dims, &r = g.rhs.dims, &o = g.dst.dims;
      if (l[0].count != r[0].count || l[2].count != r[1].count || o[0].count != l[0].count || o[1].count != l[1].count || o[2].count != r[2].count) {
        return InvalidArgument("shapes do not form [b,m,k] x [b,k,n] -> [b,m,n]");
      }
      return Status::Ok();
    }
    case Opcode::kGpConvolution:
      return CheckConvolution(program, std::get<GpConvolution>(inst.operands));
    case Opcode::kGpReduceWindow:
      return CheckReduceWindow(program, std::get<GpReduceWindow>(inst.operands));
    case Opcode::kGpSelectAndScatter:
      return CheckSelectAndScatter(program, std::get<GpSelectAndScatter>(inst.operands));
    case Opcode::kCollective:
      return CheckCollective(program, std::get<Collective>(inst.operands));
    case Opcode::kPartitionId: {
      const auto& p = std::get<PartitionId>(inst.operands);
      TRN_RETURN_IF_ERROR(Writable(program, p.dst.tensor));
      if (p.dst.num_elements() != 1 || (HbmDType(program, p.dst) != DType::kU32 && HbmDType(program, p.dst) != DType::kS32)) {
        return InvalidArgument("partition_id writes one u32 or s32");
      }
      return Status::Ok();
    }
    case Opcode::kGpRegionReduce:
    case Opcode::kGpRegionReduceWindow:
    case Opcode::kGpRegionScatter:
    case Opcode::kGpRegionSort:
      return CheckRegionOp(program, inst);
    case Opcode::kHostCallback:
      for (const HbmAP& dst : std::get<HostCallback>(inst.operands).dsts) TRN_RETURN_IF_ERROR(Writable(program, dst.tensor));
      return Status::Ok();
    default:
      return CheckDataDependent(program, inst);
  }
}

}  // namespace

Status CheckInstruction(const Program& program, const Instruction& inst) {
  switch (inst.opcode) {
    case Opcode::kDmaCopy: {
      const auto& d = std::get<DmaCopy>(inst.operands);
      for (const Endpoint* e : {&d.dst, &d.src}) {
        if (e->is_tile && e->tile.memory == Memory::kPsum) return InvalidArgument("PSUM is not a DMA endpoint");
      }
      if (!d.dst.is_tile) TRN_RETURN_IF_ERROR(Writable(program, d.dst.hbm.tensor));
      const int64_t dst = d.dst.is_tile ? d.dst.tile.num_elements() : d.dst.hbm.num_elements();
      const int64_t src = d.src.is_tile ? d.src.tile.num_elements() : d.src.hbm.num_elements();
      return SameCount("dma_copy", dst, src);
    }
    case Opcode::kMatmul:
      return CheckMatmul(program, std::get<Matmul>(inst.operands));
    case Opcode::kTranspose: {
      const auto& t = std::get<Transpose>(inst.operands);
      if (t.dst.memory != Memory::kPsum) return InvalidArgument("dst must be in PSUM");
      const int partitions = program.target->partitions;
      if (t.src.num_free != 1 || t.src.free_size() > partitions) {
        return InvalidArgument("src must be [P, F <= " + std::to_string(partitions) + "] with one free dim");
      }
      if (t.dst.partition_count != t.src.free_size() || t.dst.free_size() != t.src.partition_count) {
        return InvalidArgument("dst is " + Shape(t.dst) + ", the transpose of " + Shape(t.src) + " needs [" + std::to_string(t.src.free_size()) +
                               " partitions, " + std::to_string(t.src.partition_count) + "]");
      }
      return Status::Ok();
    }
    case Opcode::kTensorTensor: {
      const auto& t = std::get<TensorTensor>(inst.operands);
      TRN_RETURN_IF_ERROR(CheckAluOp(static_cast<uint8_t>(t.op), 2, t.a.dtype));
      TRN_RETURN_IF_ERROR(SameTileShape(t.dst, t.a));
      return SameTileShape(t.dst, t.b);
    }
    case Opcode::kTensorScalar: {
      const auto& t = std::get<TensorScalar>(inst.operands);
      TRN_RETURN_IF_ERROR(CheckAluOp(static_cast<uint8_t>(t.op), 2, t.src.dtype));
      TRN_RETURN_IF_ERROR(SameTileShape(t.dst, t.src));
      return PerPartitionScalar(t.scalar, t.src);
    }
    case Opcode::kScalarTensorTensor: {
      const auto& t = std::get<ScalarTensorTensor>(inst.operands);
      TRN_RETURN_IF_ERROR(CheckAluOp(static_cast<uint8_t>(t.op0), 2, t.data.dtype));
      TRN_RETURN_IF_ERROR(CheckAluOp(static_cast<uint8_t>(t.op1), 2, t.data.dtype));
      TRN_RETURN_IF_ERROR(SameTileShape(t.dst, t.data));
      TRN_RETURN_IF_ERROR(SameTileShape(t.dst, t.operand1));
      return PerPartitionScalar(t.operand0, t.data);
    }
    case Opcode::kBnStats: {
      const auto& t = std::get<BnStats>(inst.operands);
      return BatchNormStatistics("bn_stats", t.dst, t.src, 6, kBnStatsFreeMax);
    }
    case Opcode::kBnAggr: {
      const auto& t = std::get<BnAggr>(inst.operands);
      if (t.src.free_size() % 3 != 0) {
        return InvalidArgument("bn_aggr src holds (count, mean, count · variance) tuples: " + Shape(t.src) + " is not a multiple of 3 per partition");
      }
      return BatchNormStatistics("bn_aggr", t.dst, t.src, 2, std::numeric_limits<int64_t>::max());
    }
    case Opcode::kTensorReduce: {
      const auto& t = std::get<TensorReduce>(inst.operands);
      TRN_RETURN_IF_ERROR(CheckAluOp(static_cast<uint8_t>(t.op), 2, t.src.dtype));
      if (!IsReduceOp(t.op)) return InvalidArgument(AluOpName(t.op) + " is not a reduction");
      if (t.dst.partition_count != t.src.partition_count || t.dst.free_size() != 1) {
        return InvalidArgument("dst must be [" + std::to_string(t.src.partition_count) + ", 1], got " + Shape(t.dst));
      }
      return Status::Ok();
    }
    case Opcode::kTensorCopy: {
      const auto& t = std::get<TensorCopy>(inst.operands);
      return SameCount("tensor_copy", t.dst.num_elements(), t.src.num_elements());
    }
    case Opcode::kTensorTernary: {
      const auto& t = std::get<TensorTernary>(inst.operands);
      if (t.op != AluOp::kSelect && t.op != AluOp::kClamp) return InvalidArgument(AluOpName(t.op) + " is not a ternary op");
      TRN_RETURN_IF_ERROR(CheckAluOp(static_cast<uint8_t>(t.op), 3, t.b.dtype));
      for (const TileAP* src : {&t.a, &t.b, &t.c}) TRN_RETURN_IF_ERROR(SameTileShape(t.dst, *src));
      return Status::Ok();
    }
    case Opcode::kTensorUnary: {
      const auto& t = std::get<TensorUnary>(inst.operands);
      TRN_RETURN_IF_ERROR(CheckAluOp(static_cast<uint8_t>(t.op), 1, t.src.dtype));
      return SameTileShape(t.dst, t.src);
    }
    case Opcode::kActivation: {
      const auto& a = std::get<Activation>(inst.operands);
      TRN_RETURN_IF_ERROR(CheckAluOp(static_cast<uint8_t>(a.func), 1, DType::kF32));
      TRN_RETURN_IF_ERROR(SameTileShape(a.dst, a.src));
      return PerPartitionScalar(a.bias, a.src);
    }
    case Opcode::kActivationReduce: {
      const auto& a = std::get<ActivationReduce>(inst.operands);
      TRN_RETURN_IF_ERROR(CheckAluOp(static_cast<uint8_t>(a.func), 1, DType::kF32));
      TRN_RETURN_IF_ERROR(SameTileShape(a.dst, a.src));
      TRN_RETURN_IF_ERROR(PerPartitionScalar(a.scale, a.src));
      TRN_RETURN_IF_ERROR(PerPartitionScalar(a.bias, a.src));
      if (!a.has_sum()) return Status::Ok();
      if (!IsFloat(a.dst.dtype) || a.dst.dtype == DType::kF64) return InvalidArgument("a summed activation needs a float dst, got " + DTypeName(a.dst.dtype));
      if (a.dst_sum.dtype != DType::kF32 || a.dst_sum.partition_count != a.dst.partition_count || a.dst_sum.free_size() != 1) {
        return InvalidArgument("dst_sum must be fp32 [" + std::to_string(a.dst.partition_count) + ", 1], got " + Shape(a.dst_sum));
      }
      return Status::Ok();
    }
    default:
      return CheckGp(program, inst);
  }
}

}  // namespace trn::sim
