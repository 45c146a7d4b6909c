// Each opcode's operands (docs/program-format.md, "Instructions") and the access patterns,
// immediates and enums they are made of, validated as they are read.
#include <string>

#include "program_parser.h"

namespace trn::sim::loader {
namespace {

// The window of gp_reduce_window and gp_select_and_scatter: an i64 list (u32 count, then the
// values) of six values per dim, 1..8 dims; sizes, strides and dilations >= 1, paddings >= 0,
// each at most kMaxElements.
std::vector<WindowDim> ReadWindowDims(Cursor& in) {
  std::vector<WindowDim> dims;
  const size_t at = in.offset();
  const uint32_t values = in.Count("window value count", sizeof(int64_t));
  if (in.ok() && (values % 6 != 0 || values < 6 || values > 48)) {
    in.Fail(at, "window value count " + std::to_string(values) + " (expected 6 per dim, 1..8 dims)");
  }
  const uint32_t n = values / 6;
  for (uint32_t d = 0; d < n && in.ok(); ++d) {
    WindowDim w;
    w.size = in.Read<int64_t>("window size");
    w.stride = in.Read<int64_t>("window stride");
    w.base_dilation = in.Read<int64_t>("window base dilation");
    w.window_dilation = in.Read<int64_t>("window dilation");
    w.pad_low = in.Read<int64_t>("window low padding");
    w.pad_high = in.Read<int64_t>("window high padding");
    if (!in.ok()) break;
    const bool positive = w.size >= 1 && w.stride >= 1 && w.base_dilation >= 1 && w.window_dilation >= 1;
    const bool bounded = w.size <= kMaxElements && w.stride <= kMaxElements && w.base_dilation <= kMaxElements &&
                         w.window_dilation <= kMaxElements && w.pad_low >= 0 && w.pad_high >= 0 &&
                         w.pad_low <= kMaxElements && w.pad_high <= kMaxElements;
    if (!positive || !bounded) {
      in.Fail("window dim " + std::to_string(d) + " has size " + std::to_string(w.size) + " stride " + std::to_string(w.stride) +
              " dilations " + std::to_string(w.base_dilation) + "/" + std::to_string(w.window_dilation) + " padding " +
              std::to_string(w.pad_low) + "/" + std::to_string(w.pad_high) +
              " (sizes, strides and dilations must be >= 1, paddings >= 0)");
      break;
    }
    dims.push_back(w);
  }
  return dims;
}

}  // namespace

// A region program: an i64 list of words (region_program.h), decoded and type-checked here.
RegionProgram Parser::ReadRegion() {
  const size_t at = in_.offset();
  std::vector<int64_t> words(in_.Count("region word count", sizeof(int64_t)));
  for (int64_t& w : words) w = in_.Read<int64_t>("region word");
  if (!in_.ok()) return {};
  StatusOr<RegionProgram> region = DecodeRegion(words);
  if (!region.ok()) {
    in_.Fail(at, region.status().message());
    return {};
  }
  return *region;
}

Operands Parser::ParseOperands(Opcode opcode) {
  switch (opcode) {
    case Opcode::kDmaCopy: {
      DmaCopy d;
      d.dst = ReadEndpoint();
      d.src = ReadEndpoint();
      return d;
    }
    case Opcode::kMatmul: {
      Matmul m;
      m.dst = ReadTile();
      m.stationary = ReadTile();
      m.moving = ReadTile();
      const uint8_t flags = in_.Read<uint8_t>("matmul flags");
      if (in_.ok() && (flags & ~(kMatmulStart | kMatmulStop)) != 0) {
        in_.Fail("matmul flags " + std::to_string(flags) + " (only the start and stop bits are defined)");
      }
      m.start = flags & kMatmulStart;
      m.stop = flags & kMatmulStop;
      return m;
    }
    case Opcode::kTranspose: {
      Transpose t;
      t.dst = ReadTile();
      t.src = ReadTile();
      return t;
    }
    case Opcode::kTensorTensor: {
      TensorTensor t;
      t.op = ReadAluOp();
      t.dst = ReadTile();
      t.a = ReadTile();
      t.b = ReadTile();
      return t;
    }
    case Opcode::kTensorScalar: {
      TensorScalar t;
      t.op = ReadAluOp();
      t.reverse = in_.Read<uint8_t>("reverse flag") != 0;
      t.dst = ReadTile();
      t.src = ReadTile();
      t.scalar = ReadScalarOperand();
      return t;
    }
    case Opcode::kTensorReduce: {
      TensorReduce t;
      t.op = ReadAluOp();
      t.dst = ReadTile();
      t.src = ReadTile();
      return t;
    }
    case Opcode::kTensorCopy: {
      TensorCopy t;
      t.dst = ReadTile();
      t.src = ReadTile();
      return t;
    }
    case Opcode::kTensorTernary: {
      TensorTernary t;
      t.op = ReadAluOp();
      t.dst = ReadTile();
      t.a = ReadTile();
      t.b = ReadTile();
      t.c = ReadTile();
      return t;
    }
    case Opcode::kScalarTensorTensor: {
      ScalarTensorTensor t;
      t.op0 = ReadAluOp();
      t.op1 = ReadAluOp();
      t.reverse0 = in_.Read<uint8_t>("reverse0 flag") != 0;
      t.reverse1 = in_.Read<uint8_t>("reverse1 flag") != 0;
      t.dst = ReadTile();
      t.data = ReadTile();
      t.operand0 = ReadScalarOperand();
      t.operand1 = ReadTile();
      return t;
    }
    case Opcode::kBnStats: {
      BnStats t;
      t.dst = ReadTile();
      t.src = ReadTile();
      return t;
    }
    case Opcode::kBnAggr: {
      BnAggr t;
      t.dst = ReadTile();
      t.src = ReadTile();
      return t;
    }
    case Opcode::kTensorUnary: {
      TensorUnary t;
      t.op = ReadAluOp();
      t.dst = ReadTile();
      t.src = ReadTile();
      return t;
    }
    case Opcode::kActivation: {
      Activation a;
      a.func = ReadAluOp();
      a.dst = ReadTile();
      a.src = ReadTile();
      a.scale = in_.Read<float>("activation scale");
      a.bias = ReadScalarOperand();
      return a;
    }
    case Opcode::kActivationReduce: {
      ActivationReduce a;
      a.func = ReadAluOp();
      a.dst = ReadTile();
      a.src = ReadTile();
      a.scale = ReadScalarOperand();
      a.bias = ReadScalarOperand();
      const size_t at = in_.offset();
      const uint8_t sum_of = in_.Read<uint8_t>("activation_reduce sum");
      if (in_.ok() && sum_of > static_cast<uint8_t>(RowSum::kActivated)) {
        in_.Fail(at, "activation_reduce sum " + std::to_string(sum_of) +
                         " (expected 0: none, 1: of dst as written, 2: of the activated values)");
      }
      a.sum_of = static_cast<RowSum>(sum_of);
      if (a.has_sum()) a.dst_sum = ReadTile();
      return a;
    }
    case Opcode::kGpElementwise: {
      GpElementwise g;
      g.op = ReadAluOp();
      g.dst = ReadHbm();
      g.srcs = ReadHbmList();
      return g;
    }
    case Opcode::kGpCopy: {
      GpCopy g;
      g.dst = ReadHbm();
      g.src = ReadHbm();
      return g;
    }
    case Opcode::kGpFill: {
      GpFill g;
      g.dst = ReadHbm();
      g.value = ReadScalar();
      return g;
    }
    case Opcode::kGpIota: {
      GpIota g;
      g.dst = ReadHbm();
      g.dim = in_.Read<uint8_t>("iota dim");
      return g;
    }
    case Opcode::kIota: {
      Iota t;
      t.dst = ReadTile();
      ReadAffine(t.base, t.partition_step, t.free_steps);
      return t;
    }
    case Opcode::kAffineSelect: {
      AffineSelect a;
      a.op = ReadAluOp();
      a.dst = ReadTile();
      a.src = ReadTile();
      ReadAffine(a.base, a.partition_step, a.free_steps);
      a.fill = ReadScalar();
      return a;
    }
    case Opcode::kGpBitcast: {
      GpBitcast g;
      g.dst = in_.Read<uint32_t>("bitcast dst tensor");
      g.src = in_.Read<uint32_t>("bitcast src tensor");
      for (uint32_t t : {g.dst, g.src}) {
        if (in_.ok() && t >= program_->tensors.size()) in_.Fail("bitcast tensor " + std::to_string(t) + " is not in the tensor table");
      }
      return g;
    }
    case Opcode::kGpReduce: {
      GpReduce g;
      g.op = ReadAluOp();
      g.dst = ReadHbm();
      g.src = ReadHbm();
      g.reduced = in_.Read<uint8_t>("reduced dim count");
      g.init = ReadScalar();
      return g;
    }
    case Opcode::kGpBatchMatmul: {
      GpBatchMatmul g;
      g.dst = ReadHbm();
      g.lhs = ReadHbm();
      g.rhs = ReadHbm();
      return g;
    }
    case Opcode::kGpGather: {
      GpGather g;
      g.dst = ReadHbm();
      g.src = ReadHbm();
      g.indices = ReadHbm();
      return g;
    }
    case Opcode::kGpScatter: {
      GpScatter g;
      g.op = ReadAluOp();
      g.clamp = ReadFlag("scatter bounds mode") == kScatterClamp;
      g.dst = ReadHbm();
      g.updates = ReadHbm();
      g.indices = ReadHbm();
      return g;
    }
    case Opcode::kGpArgReduce: {
      GpArgReduce g;
      g.op = ReadAluOp();
      g.select_form = ReadFlag("arg-reduce body") == kArgReduceSelect;
      for (HbmAP* ap : {&g.dst_value, &g.dst_index, &g.src_value, &g.src_index}) *ap = ReadHbm();
      g.reduced = in_.Read<uint8_t>("reduced dim count");
      g.init_value = ReadScalar();
      g.init_index = ReadScalar();
      return g;
    }
    case Opcode::kGpSort: {
      GpSort g;
      g.num_keys = in_.Read<uint8_t>("sort key count");
      g.descending = ReadFlag("sort direction") == 1;
      g.canonical_floats = ReadFlag("sort float order") == kSortFloatCanonical;
      g.dsts = ReadHbmList();
      g.srcs = ReadHbmList();
      return g;
    }
    case Opcode::kGpConvolution: {
      GpConvolution g;
      g.feature_groups = in_.Read<uint32_t>("feature group count");
      g.batch_groups = in_.Read<uint32_t>("batch group count");
      const uint32_t n = in_.Count("window value count", sizeof(int64_t));
      if (in_.ok() && n % 4 != 0) in_.Fail("window value count " + std::to_string(n) + " is not 4 per spatial dim");
      for (uint32_t i = 0; i + 4 <= n && in_.ok(); i += 4) {
        ConvWindowDim d;
        d.stride = in_.Read<int64_t>("window stride");
        d.pad_low = in_.Read<int64_t>("window low padding");
        d.lhs_dilation = in_.Read<int64_t>("lhs dilation");
        d.rhs_dilation = in_.Read<int64_t>("rhs dilation");
        g.window.push_back(d);
      }
      g.dst = ReadHbm();
      g.lhs = ReadHbm();
      g.rhs = ReadHbm();
      return g;
    }
    case Opcode::kGpReduceWindow: {
      GpReduceWindow g;
      g.op = ReadAluOp();
      g.dst = ReadHbm();
      g.src = ReadHbm();
      g.init = ReadScalar();
      g.windows = ReadWindowDims(in_);
      return g;
    }
    case Opcode::kGpSelectAndScatter: {
      GpSelectAndScatter g;
      g.select = ReadAluOp();
      g.op = ReadAluOp();
      g.dst = ReadHbm();
      g.operand = ReadHbm();
      g.source = ReadHbm();
      g.init = ReadScalar();
      g.windows = ReadWindowDims(in_);
      return g;
    }
    case Opcode::kGpRegionReduce: {
      GpRegionReduce g;
      g.reduced = in_.Read<uint8_t>("reduced dim count");
      g.dsts = ReadHbmList();
      g.srcs = ReadHbmList();
      g.inits = ReadHbmList();
      g.region = ReadRegion();
      return g;
    }
    case Opcode::kGpRegionReduceWindow: {
      GpRegionReduceWindow g;
      g.dsts = ReadHbmList();
      g.srcs = ReadHbmList();
      g.inits = ReadHbmList();
      g.windows = ReadWindowDims(in_);
      g.region = ReadRegion();
      return g;
    }
    case Opcode::kGpRegionScatter: {
      GpRegionScatter g;
      g.dsts = ReadHbmList();
      g.updates = ReadHbmList();
      g.indices = ReadHbm();
      g.region = ReadRegion();
      return g;
    }
    case Opcode::kGpRegionSort: {
      GpRegionSort g;
      g.dsts = ReadHbmList();
      g.srcs = ReadHbmList();
      g.region = ReadRegion();
      return g;
    }
    case Opcode::kCollective:
      return ReadCollective();
    case Opcode::kPartitionId: {
      PartitionId p;
      p.dst = ReadHbm();
      return p;
    }
    case Opcode::kHostCallback: {
      HostCallback h;
      h.callback = in_.Read<uint64_t>("host callback key");
      h.dsts = ReadHbmList();
      h.srcs = ReadHbmList();
      return h;
    }
  }
  return DmaCopy{};
}

// collective: kind, op, dim, concat dim, algorithm (u8 each; version 5 on, before it the ring),
// channel (u32), groups (an i64 list: the group size, then the groups' ranks), pairs (an i64
// list of source, target ranks), dst, src.
Collective Parser::ReadCollective() {
  Collective c;
  const size_t at = in_.offset();
  c.kind = in_.Read<uint8_t>("collective kind");
  if (in_.ok() && c.kind > kCollectiveBroadcast) in_.Fail(at, "collective kind " + std::to_string(c.kind) + " (expected 0..5)");
  c.op = ReadAluOp();
  c.dim = in_.Read<uint8_t>("collective dim");
  c.concat_dim = in_.Read<uint8_t>("collective concat dim");
  c.algorithm = kCollectiveRing;
  if (version_ >= 5) {
    const size_t algorithm_at = in_.offset();
    c.algorithm = in_.Read<uint8_t>("collective algorithm");
    if (in_.ok() && c.algorithm > kCollectiveHierarchical) in_.Fail(algorithm_at, "collective algorithm " + std::to_string(c.algorithm) + " (expected 0..2)");
  }
  c.channel = in_.Read<uint32_t>("collective channel");
  const auto read_list = [this](const char* what) {
    std::vector<int64_t> values(in_.Count(what, sizeof(int64_t)));
    for (int64_t& v : values) {
      v = in_.Read<int64_t>(what);
      if (in_.ok() && (v < 0 || v > kMaxCollectiveRank)) in_.Fail(std::string(what) + " value " + std::to_string(v) + " out of range");
    }
    return values;
  };
  const std::vector<int64_t> groups = read_list("collective groups");
  const std::vector<int64_t> pairs = read_list("collective pairs");
  if (in_.ok() && !groups.empty()) {
    const int64_t size = groups[0];
    if (size < 1 || (groups.size() - 1) % size != 0) {
      in_.Fail(at, "collective groups list of " + std::to_string(groups.size()) + " values does not hold groups of " + std::to_string(size));
    } else {
      for (size_t i = 1; i < groups.size(); i += size) c.groups.emplace_back(groups.begin() + i, groups.begin() + i + size);
    }
  }
  if (in_.ok() && pairs.size() % 2 != 0) in_.Fail(at, "collective pairs list has an odd length");
  for (size_t i = 0; in_.ok() && i + 1 < pairs.size(); i += 2) c.pairs.emplace_back(pairs[i], pairs[i + 1]);
  c.dst = ReadHbm();
  c.src = ReadHbm();
  return c;
}

DType Parser::ReadDType(const char* what, bool allow_f64, bool allow_table_only) {
  const size_t at = in_.offset();
  const uint8_t code = in_.Read<uint8_t>(what);
  if (!in_.ok()) return DType::kInvalid;
  if (!IsValidDType(code)) {
    in_.Fail(at, std::string(what) + ": unknown dtype code " + std::to_string(code));
  } else if (!allow_f64 && code == static_cast<uint8_t>(DType::kF64)) {
    in_.Fail(at, std::string(what) + ": f64 is only for GpSimd general-purpose ops");
  } else if (!allow_table_only && IsTableOnly(static_cast<DType>(code))) {
    in_.Fail(at, std::string(what) + ": " + DTypeName(static_cast<DType>(code)) +
                     " is only a parameter's or an output's tensor type");
  }
  return static_cast<DType>(code);
}

AluOp Parser::ReadAluOp() {
  const size_t at = in_.offset();
  const uint8_t code = in_.Read<uint8_t>("ALU op");
  if (in_.ok() && AluArity(code) == 0) in_.Fail(at, "unknown ALU op code " + std::to_string(code));
  return static_cast<AluOp>(code);
}

TileAP Parser::ReadTile() {
  TileAP ap{};
  const size_t at = in_.offset();
  const uint8_t memory = in_.Read<uint8_t>("tile memory");
  if (in_.ok() && memory != 1 && memory != 2) in_.Fail(at, "tile memory " + std::to_string(memory) + " (expected 1 SBUF or 2 PSUM)");
  ap.memory = static_cast<Memory>(memory);
  ap.dtype = ReadDType("tile dtype", false);
  ap.partition_start = in_.Read<uint16_t>("partition start");
  ap.partition_count = in_.Read<uint16_t>("partition count");
  ap.byte_offset = in_.Read<uint32_t>("tile byte offset");
  const uint32_t dims = in_.Count("free dim count", 8);
  if (in_.ok() && (dims < 1 || dims > 4)) in_.Fail("tile has " + std::to_string(dims) + " free dims (expected 1..4)");
  ap.num_free = static_cast<int>(dims);
  for (uint32_t d = 0; d < dims && in_.ok(); ++d) {
    ap.free[d].stride = in_.Read<int32_t>("free dim stride");
    ap.free[d].count = in_.Read<uint32_t>("free dim count");
    if (in_.ok() && ap.free[d].count == 0) in_.Fail("free dim " + std::to_string(d) + " has count 0");
  }
  if (!in_.ok()) return ap;
  const std::string error = TilePlacementError(*program_->target, ap);
  if (!error.empty()) in_.Fail(at, error);
  return ap;
}

std::string TilePlacementError(const TargetSpec& t, const TileAP& ap) {
  const int start = ap.partition_start, count = ap.partition_count;
  std::string rule;
  if (count < 1 || start + count > t.partitions) {
    rule = "partitions must lie in 0.." + std::to_string(t.partitions - 1);
  } else if (count > 64 && start != 0) {
    rule = "a tile of more than 64 partitions starts at 0";
  } else if (count > 32 && count <= 64 && start != 0 && start != 64) {
    rule = "a tile of 33..64 partitions starts at 0 or 64";
  } else if (count <= 32 && start % 32 != 0) {
    rule = "a tile of at most 32 partitions starts at 0, 32, 64 or 96";
  }
  if (!rule.empty()) {
    return "tile partitions start " + std::to_string(start) + " count " + std::to_string(count) + ": " + rule;
  }
  int64_t low = 0, high = 0;
  for (int d = 0; d < ap.num_free; ++d) {
    const int64_t extent = static_cast<int64_t>(ap.free[d].stride) * (static_cast<int64_t>(ap.free[d].count) - 1);
    (extent < 0 ? low : high) += extent;
  }
  const int64_t size = DTypeSize(ap.dtype);
  const int64_t first = int64_t{ap.byte_offset} + low * size, end = int64_t{ap.byte_offset} + (high + 1) * size;
  const int64_t capacity = ap.memory == Memory::kSbuf ? t.sbuf_bytes_per_partition : t.psum_banks * t.psum_bank_bytes;
  if (first < 0 || end > capacity) {
    return std::string(ap.memory == Memory::kSbuf ? "SBUF" : "PSUM") + " access pattern covers bytes [" + std::to_string(first) + ", " +
           std::to_string(end) + ") of a partition, outside [0, " + std::to_string(capacity) + ")";
  }
  return "";
}

HbmAP Parser::ReadHbm() {
  HbmAP ap{};
  const size_t at = in_.offset();
  ap.tensor = in_.Read<uint32_t>("HBM tensor index");
  ap.offset = in_.Read<int64_t>("HBM offset");
  const uint32_t dims = in_.Count("HBM dim count", 16);
  if (in_.ok() && ap.tensor >= program_->tensors.size()) {
    in_.Fail(at, "HBM access pattern names tensor " + std::to_string(ap.tensor) + " but the table has " + std::to_string(program_->tensors.size()));
  }
  if (in_.ok() && (dims < 1 || dims > 8)) in_.Fail("HBM access pattern has " + std::to_string(dims) + " dims (expected 1..8)");
  ap.num_dims = static_cast<int>(dims);
  int64_t low = ap.offset, high = ap.offset;
  for (uint32_t d = 0; d < dims && in_.ok(); ++d) {
    ap.dims[d].stride = in_.Read<int64_t>("HBM dim stride");
    ap.dims[d].count = in_.Read<int64_t>("HBM dim count");
    const HbmDim& dim = ap.dims[d];
    if (in_.ok() && (dim.count < 1 || dim.count > kMaxElements || dim.stride > kMaxElements || dim.stride < -kMaxElements)) {
      in_.Fail("HBM dim " + std::to_string(d) + " has stride " + std::to_string(dim.stride) + " count " + std::to_string(dim.count) + " (out of range)");
    }
    int64_t extent;
    if (in_.ok() && __builtin_mul_overflow(dim.stride, dim.count - 1, &extent)) in_.Fail("HBM dim extent overflows");
    if (in_.ok()) (extent < 0 ? low : high) += extent;
  }
  if (!in_.ok()) return ap;
  const Tensor& tensor = program_->tensors[ap.tensor];
  if (low < 0 || high >= tensor.num_elements) {
    in_.Fail(at, "HBM access pattern covers elements [" + std::to_string(low) + ", " + std::to_string(high) + "] of tensor " +
                     std::to_string(ap.tensor) + " (" + tensor.name + ") which has " + std::to_string(tensor.num_elements));
  }
  return ap;
}

Scalar Parser::ReadScalar() {
  Scalar s{};
  s.dtype = ReadDType("scalar dtype", true);
  if (IsFloat(s.dtype)) {
    s.float_value = in_.Read<double>("scalar value");
  } else {
    s.int_value = in_.Read<int64_t>("scalar value");
  }
  return s;
}

ScalarOperand Parser::ReadScalarOperand() {
  ScalarOperand s{};
  const size_t at = in_.offset();
  const uint8_t kind = in_.Read<uint8_t>("scalar operand kind");
  const auto immediate = static_cast<uint8_t>(ScalarKind::kImmediate), tile = static_cast<uint8_t>(ScalarKind::kTile);
  if (in_.ok() && kind != immediate && kind != tile) {
    in_.Fail(at, "scalar operand kind " + std::to_string(kind) + " (expected " + std::to_string(immediate) + " immediate or " +
                     std::to_string(tile) + " tile)");
  }
  s.is_tile = kind == tile;
  if (s.is_tile) {
    s.tile = ReadTile();
  } else {
    s.immediate = ReadScalar();
  }
  return s;
}

void Parser::ReadAffine(int64_t& base, int64_t& partition_step, std::vector<int64_t>& free_steps) {
  base = in_.Read<int64_t>("affine base");
  partition_step = in_.Read<int64_t>("affine partition step");
  free_steps.resize(in_.Count("affine free steps", sizeof(int64_t)));
  for (int64_t& s : free_steps) s = in_.Read<int64_t>("affine free step");
}

Endpoint Parser::ReadEndpoint() {
  Endpoint e{};
  const size_t at = in_.offset();
  const uint8_t kind = in_.Read<uint8_t>("DMA endpoint kind");
  const auto hbm = static_cast<uint8_t>(EndpointKind::kHbm), tile = static_cast<uint8_t>(EndpointKind::kTile);
  if (in_.ok() && kind != hbm && kind != tile) {
    in_.Fail(at, "DMA endpoint kind " + std::to_string(kind) + " (expected " + std::to_string(hbm) + " HBM or " +
                     std::to_string(tile) + " tile)");
  }
  e.is_tile = kind == tile;
  if (e.is_tile) {
    e.tile = ReadTile();
  } else {
    e.hbm = ReadHbm();
  }
  return e;
}

std::vector<HbmAP> Parser::ReadHbmList() {
  std::vector<HbmAP> list;
  const uint32_t n = in_.Count("source count", 16);
  for (uint32_t i = 0; i < n && in_.ok(); ++i) list.push_back(ReadHbm());
  return list;
}

// A u8 that must be 0 or 1 (a two-valued mode of isa.def, or a yes/no).
uint8_t Parser::ReadFlag(const char* what) {
  const size_t at = in_.offset();
  const uint8_t value = in_.Read<uint8_t>(what);
  if (in_.ok() && value > 1) in_.Fail(at, std::string(what) + " " + std::to_string(value) + " (expected 0 or 1)");
  return value;
}

}  // namespace trn::sim::loader
