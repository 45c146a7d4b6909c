#include "program_loader.h"

#include <cstring>
#include <string>

namespace trn::sim {
namespace {

constexpr char kMagic[8] = {'T', 'R', 'N', 'P', 'R', 'O', 'G', '\0'};
// Version 2 added blocks and control flow; a version 1 program (one stream list) still loads, as
// one block that ends the program.
constexpr uint32_t kVersion = 2;
constexpr uint32_t kOldestVersion = 1;
// No dimension or tensor may be large enough for element arithmetic to overflow int64.
constexpr int64_t kMaxElements = int64_t{1} << 48;

// Reads little-endian fields with a sticky error: after the first failure every read returns
// zero, so parsing code stays linear and the first problem is the one reported.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  size_t offset() const { return offset_; }
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  void Fail(size_t at, const std::string& message) {
    if (!status_.ok()) return;
    status_ = InvalidArgument("malformed program at byte " + std::to_string(at) + context_ +
                              ": " + message);
  }
  void Fail(const std::string& message) { Fail(offset_, message); }
  void SetContext(std::string context) { context_ = std::move(context); }

  template <typename T>
  T Read(const char* what) {
    T value{};
    if (!ok()) return value;
    if (size_ - offset_ < sizeof(T)) {
      Fail("truncated: expected " + std::string(what) + " (" + std::to_string(sizeof(T)) +
           " bytes), " + std::to_string(size_ - offset_) + " left");
      return value;
    }
    std::memcpy(&value, data_ + offset_, sizeof(T));
    offset_ += sizeof(T);
    return value;
  }

  // A list count, checked against the bytes left (each element takes at least `min_bytes`).
  uint32_t Count(const char* what, size_t min_bytes) {
    const size_t at = offset_;
    const uint32_t n = Read<uint32_t>(what);
    if (ok() && n * static_cast<uint64_t>(min_bytes) > size_ - offset_) {
      Fail(at, std::string(what) + " " + std::to_string(n) + " needs at least " +
                   std::to_string(n * static_cast<uint64_t>(min_bytes)) + " bytes, " +
                   std::to_string(size_ - offset_) + " left");
      return 0;
    }
    return ok() ? n : 0;
  }

  std::string String(const char* what) {
    const uint32_t n = Count(what, 1);
    if (!ok()) return {};
    std::string s(reinterpret_cast<const char*>(data_ + offset_), n);
    offset_ += n;
    return s;
  }

  std::vector<uint8_t> Blob(const char* what) {
    const size_t at = offset_;
    const uint64_t n = Read<uint64_t>(what);
    if (!ok()) return {};
    if (n > size_ - offset_) {
      Fail(at, std::string(what) + " of " + std::to_string(n) + " bytes, " +
                   std::to_string(size_ - offset_) + " left");
      return {};
    }
    std::vector<uint8_t> blob(data_ + offset_, data_ + offset_ + n);
    offset_ += n;
    return blob;
  }

  bool AtEnd() const { return offset_ == size_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t offset_ = 0;
  Status status_;
  std::string context_;
};

class Parser {
 public:
  Parser(const uint8_t* data, size_t size) : in_(data, size) {}
  StatusOr<std::unique_ptr<Program>> Parse();

 private:
  void ParseTensors();
  void ParseBlocks();
  void ParseStreams(Block& block);
  void ParseExit(Block& block);
  Status CheckBlocks() const;
  Instruction ParseInstruction(int stream);
  Operands ParseOperands(Opcode opcode);
  DType ReadDType(const char* what, bool allow_f64);
  AluOp ReadAluOp();
  TileAP ReadTile();
  HbmAP ReadHbm();
  Scalar ReadScalar();
  ScalarOperand ReadScalarOperand();
  Endpoint ReadEndpoint();
  std::vector<HbmAP> ReadHbmList();
  bool ReadFlag(const char* what);

  Cursor in_;
  std::string block_name_;  // "block 3 " while parsing blocks of a multi-block program
  std::unique_ptr<Program> program_ = std::make_unique<Program>();
};

StatusOr<std::unique_ptr<Program>> Parser::Parse() {
  char magic[8];
  for (char& c : magic) c = static_cast<char>(in_.Read<uint8_t>("magic"));
  if (in_.ok() && std::memcmp(magic, kMagic, 8) != 0) in_.Fail(0, "bad magic: not a NeuronCore program (expected \"TRNPROG\\0\")");
  const uint32_t version = in_.Read<uint32_t>("version");
  if (in_.ok() && (version < kOldestVersion || version > kVersion)) {
    in_.Fail(8, "program format version " + std::to_string(version) + ", this runtime reads versions " +
                    std::to_string(kOldestVersion) + " to " + std::to_string(kVersion));
  }
  const size_t target_at = in_.offset();
  const std::string target = in_.String("target name");
  if (in_.ok()) {
    program_->target = FindTarget(target);
    if (program_->target == nullptr) in_.Fail(target_at, "unknown target \"" + target + "\" (expected trn1, trn2 or trn3)");
  }
  ParseTensors();
  if (version == 1) {
    program_->blocks.emplace_back();
    ParseStreams(program_->blocks.back());
  } else {
    ParseBlocks();
  }
  const uint32_t debug_count = in_.Count("debug table length", 12);
  for (uint32_t i = 0; i < debug_count && in_.ok(); ++i) {
    DebugInfo entry;
    entry.op = in_.String("debug op");
    entry.name = in_.String("debug name");
    entry.location = in_.String("debug location");
    program_->debug.push_back(std::move(entry));
  }
  program_->source = in_.String("source text");
  if (in_.ok() && !in_.AtEnd()) in_.Fail("trailing bytes after the source text");
  if (!in_.ok()) return in_.status();
  const Status blocks = CheckBlocks();
  if (!blocks.ok()) return blocks;
  program_->streams = program_->blocks[0].streams;
  return std::move(program_);
}

// What can only be checked once the whole program is read: debug ids and block targets.
Status Parser::CheckBlocks() const {
  const size_t num_debug = program_->debug.size(), num_blocks = program_->blocks.size();
  for (size_t b = 0; b < num_blocks; ++b) {
    const Block& block = program_->blocks[b];
    const std::string where = num_blocks > 1 ? "block " + std::to_string(b) + " " : "";
    for (int s = 0; s < kNumStreams; ++s) {
      const auto& insts = block.streams[s];
      for (size_t i = 0; i < insts.size(); ++i) {
        if (insts[i].debug_id >= num_debug) {
          return InvalidArgument("malformed program: " + where + StreamName(s) + " instruction " + std::to_string(i) +
                                 " has debug id " + std::to_string(insts[i].debug_id) + " but the debug table has " +
                                 std::to_string(num_debug) + " entries");
        }
      }
    }
    const BlockExit& exit = block.exit;
    if (exit.op == ControlOp::kEnd) continue;
    const std::string name = "block " + std::to_string(b) + " exit (" + OpcodeName(static_cast<uint16_t>(exit.op)) + ")";
    if (exit.debug_id >= num_debug) {
      return InvalidArgument("malformed program: " + name + " has debug id " + std::to_string(exit.debug_id) +
                             " but the debug table has " + std::to_string(num_debug) + " entries");
    }
    for (uint32_t target : exit.targets) {
      if (target >= num_blocks) {
        return InvalidArgument("malformed program: " + name + " targets block " + std::to_string(target) +
                               " but the program has " + std::to_string(num_blocks) + " blocks");
      }
    }
  }
  return Status::Ok();
}

void Parser::ParseBlocks() {
  // A block takes at least 4 (stream count) + 2 (exit opcode) + 4 (exit debug id) bytes.
  const size_t at = in_.offset();
  const uint32_t n = in_.Count("block count", 10);
  if (in_.ok() && n == 0) in_.Fail(at, "a program has at least one block (execution starts at block 0)");
  for (uint32_t b = 0; b < n && in_.ok(); ++b) {
    program_->blocks.emplace_back();
    block_name_ = "block " + std::to_string(b) + " ";
    ParseStreams(program_->blocks.back());
    in_.SetContext(" (" + block_name_ + "exit)");
    ParseExit(program_->blocks.back());
    in_.SetContext("");
  }
  block_name_.clear();
}

void Parser::ParseExit(Block& block) {
  BlockExit& exit = block.exit;
  const size_t at = in_.offset();
  const uint16_t op = in_.Read<uint16_t>("exit opcode");
  exit.debug_id = in_.Read<uint32_t>("exit debug id");
  if (!in_.ok()) return;
  switch (static_cast<ControlOp>(op)) {
    case ControlOp::kEnd:
      exit.op = ControlOp::kEnd;
      return;
    case ControlOp::kJump:
      exit.op = ControlOp::kJump;
      exit.targets.push_back(in_.Read<uint32_t>("jump target"));
      return;
    case ControlOp::kBranch:
    case ControlOp::kSwitch: {
      exit.op = static_cast<ControlOp>(op);
      const bool branch = exit.op == ControlOp::kBranch;
      const size_t selector_at = in_.offset();
      exit.selector = ReadHbm();
      if (!in_.ok()) return;
      const DType dtype = program_->tensors[exit.selector.tensor].dtype;
      if (exit.selector.num_elements() != 1) {
        in_.Fail(selector_at, std::string(branch ? "branch predicate" : "switch index") + " addresses " +
                                  std::to_string(exit.selector.num_elements()) + " elements (expected 1)");
      } else if (IsFloat(dtype) || (!branch && dtype == DType::kPred)) {
        in_.Fail(selector_at, std::string(branch ? "branch predicate must be pred or an integer"
                                                 : "switch index must be an integer") +
                                  ", got " + DTypeName(dtype));
      }
      if (branch) {
        exit.targets.push_back(in_.Read<uint32_t>("branch target if true"));
        exit.targets.push_back(in_.Read<uint32_t>("branch target if false"));
        return;
      }
      const size_t count_at = in_.offset();
      const uint32_t n = in_.Count("switch target count", 4);
      if (in_.ok() && n == 0) in_.Fail(count_at, "switch has no targets");
      for (uint32_t i = 0; i < n && in_.ok(); ++i) exit.targets.push_back(in_.Read<uint32_t>("switch target"));
      return;
    }
  }
  in_.Fail(at, "unknown exit opcode " + std::to_string(op) + " (expected 0 end, 8 jump, 9 branch or 10 switch)");
}

void Parser::ParseTensors() {
  const uint32_t n = in_.Count("tensor count", 19);
  std::vector<int> parameter_seen, output_seen;
  for (uint32_t i = 0; i < n && in_.ok(); ++i) {
    const size_t at = in_.offset();
    Tensor t;
    t.name = in_.String("tensor name");
    const uint8_t kind = in_.Read<uint8_t>("tensor kind");
    t.index = in_.Read<uint32_t>("tensor index");
    t.dtype = ReadDType("tensor dtype", true);
    if (in_.ok() && kind > 3) in_.Fail(at, "tensor " + std::to_string(i) + " has kind " + std::to_string(kind) + " (expected 0..3)");
    t.kind = static_cast<TensorKind>(kind);
    const uint32_t rank = in_.Count("tensor rank", 8);
    t.num_elements = 1;
    for (uint32_t d = 0; d < rank && in_.ok(); ++d) {
      const int64_t dim = in_.Read<int64_t>("tensor dimension");
      if (in_.ok() && (dim < 0 || dim > kMaxElements)) in_.Fail("tensor " + std::to_string(i) + " dimension " + std::to_string(dim) + " out of range");
      t.shape.push_back(dim);
      t.num_elements = dim == 0 ? 0 : t.num_elements * dim;
      if (in_.ok() && t.num_elements > kMaxElements) in_.Fail("tensor " + std::to_string(i) + " has too many elements");
    }
    t.byte_size = t.num_elements * DTypeSize(t.dtype);
    t.data = in_.Blob("tensor data");
    if (!in_.ok()) return;
    const bool constant = t.kind == TensorKind::kConstant;
    if (static_cast<int64_t>(t.data.size()) != (constant ? t.byte_size : 0)) {
      in_.Fail(at, "tensor " + std::to_string(i) + " (" + t.name + ") has " + std::to_string(t.data.size()) + " data bytes, expected " +
                       std::to_string(constant ? t.byte_size : 0));
      return;
    }
    if (t.kind == TensorKind::kParameter || t.kind == TensorKind::kOutput) {
      auto& seen = t.kind == TensorKind::kParameter ? parameter_seen : output_seen;
      if (t.index >= n || (t.index < seen.size() && seen[t.index])) {
        in_.Fail(at, "tensor " + std::to_string(i) + " (" + t.name + ") has duplicate or out-of-range index " + std::to_string(t.index));
        return;
      }
      if (seen.size() <= t.index) seen.resize(t.index + 1, 0);
      seen[t.index] = 1;
    }
    program_->tensors.push_back(std::move(t));
  }
  for (const auto* seen : {&parameter_seen, &output_seen}) {
    for (size_t k = 0; k < seen->size(); ++k) {
      if (!(*seen)[k]) in_.Fail(std::string(seen == &parameter_seen ? "parameter" : "output") + " indices skip " + std::to_string(k));
    }
  }
}

void Parser::ParseStreams(Block& block) {
  const uint32_t n = in_.Count("stream count", 5);
  bool seen[kNumStreams] = {};
  for (uint32_t i = 0; i < n && in_.ok(); ++i) {
    const size_t at = in_.offset();
    const uint8_t id = in_.Read<uint8_t>("stream id");
    if (in_.ok() && (id >= kNumStreams || seen[id])) {
      in_.Fail(at, "stream id " + std::to_string(id) + (id >= kNumStreams ? " out of range 0..20" : " appears twice"));
      return;
    }
    seen[id] = true;
    const uint32_t count = in_.Count("instruction count", 10);
    auto& insts = block.streams[id];
    for (uint32_t k = 0; k < count && in_.ok(); ++k) {
      const size_t inst_at = in_.offset();
      in_.SetContext(" (" + block_name_ + StreamName(id) + " instruction " + std::to_string(k) + ")");
      Instruction inst = ParseInstruction(id);
      if (!in_.ok()) return;
      const Status rule = CheckInstruction(*program_, inst);
      if (!rule.ok()) {
        in_.Fail(inst_at, OpcodeName(static_cast<uint16_t>(inst.opcode)) + ": " + rule.message());
        return;
      }
      insts.push_back(std::move(inst));
    }
    in_.SetContext("");
  }
}

bool OpcodeRunsOn(uint16_t opcode, int stream) {
  if (opcode == static_cast<uint16_t>(Opcode::kDmaCopy)) return stream >= kFirstDmaStream;
  if (opcode == 16 || opcode == 17) return stream == kStreamPE;
  if (opcode >= 32 && opcode <= 37) return stream == kStreamDVE;
  if (opcode == 48) return stream == kStreamACT;
  return opcode >= 64 && opcode <= 74 && stream == kStreamPOOL;
}

Instruction Parser::ParseInstruction(int stream) {
  Instruction inst{};
  const size_t at = in_.offset();
  const uint16_t opcode = in_.Read<uint16_t>("opcode");
  if (in_.ok() && (opcode == static_cast<uint16_t>(ControlOp::kJump) || opcode == static_cast<uint16_t>(ControlOp::kBranch) ||
                   opcode == static_cast<uint16_t>(ControlOp::kSwitch))) {
    in_.Fail(at, "control opcode " + OpcodeName(opcode) + " inside a stream: control instructions are block exits");
    return inst;
  }
  if (in_.ok() && OpcodeName(opcode).starts_with("opcode(")) {
    in_.Fail(at, "unknown opcode " + std::to_string(opcode));
    return inst;
  }
  if (in_.ok() && !OpcodeRunsOn(opcode, stream)) {
    in_.Fail(at, "opcode " + OpcodeName(opcode) + " does not run on stream " + StreamName(stream));
    return inst;
  }
  inst.opcode = static_cast<Opcode>(opcode);
  inst.debug_id = in_.Read<uint32_t>("debug id");
  const uint32_t waits = in_.Count("wait count", 5);
  for (uint32_t i = 0; i < waits && in_.ok(); ++i) {
    const size_t wait_at = in_.offset();
    Wait w{in_.Read<uint8_t>("wait stream"), in_.Read<uint32_t>("wait count")};
    if (in_.ok() && w.stream >= kNumStreams) in_.Fail(wait_at, "wait on stream " + std::to_string(w.stream) + " (expected 0..20)");
    inst.waits.push_back(w);
  }
  if (in_.ok()) inst.operands = ParseOperands(inst.opcode);
  return inst;
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
      if (in_.ok() && flags > 3) in_.Fail("matmul flags " + std::to_string(flags) + " (only bits 0 and 1 are defined)");
      m.start = flags & 1;
      m.stop = flags & 2;
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
      g.clamp = ReadFlag("scatter bounds mode");
      g.dst = ReadHbm();
      g.updates = ReadHbm();
      g.indices = ReadHbm();
      return g;
    }
    case Opcode::kGpArgReduce: {
      GpArgReduce g;
      g.op = ReadAluOp();
      for (HbmAP* ap : {&g.dst_value, &g.dst_index, &g.src_value, &g.src_index}) *ap = ReadHbm();
      g.reduced = in_.Read<uint8_t>("reduced dim count");
      g.init_value = ReadScalar();
      g.init_index = ReadScalar();
      return g;
    }
    case Opcode::kGpSort: {
      GpSort g;
      g.num_keys = in_.Read<uint8_t>("sort key count");
      g.descending = ReadFlag("sort direction");
      g.canonical_floats = ReadFlag("sort float order");
      g.dsts = ReadHbmList();
      g.srcs = ReadHbmList();
      return g;
    }
  }
  return DmaCopy{};
}

DType Parser::ReadDType(const char* what, bool allow_f64) {
  const size_t at = in_.offset();
  const uint8_t code = in_.Read<uint8_t>(what);
  if (!in_.ok()) return DType::kInvalid;
  if (!IsValidDType(code)) {
    in_.Fail(at, std::string(what) + ": unknown dtype code " + std::to_string(code));
  } else if (!allow_f64 && code == static_cast<uint8_t>(DType::kF64)) {
    in_.Fail(at, std::string(what) + ": f64 is only for GpSimd general-purpose ops");
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
  int64_t low = 0, high = 0;
  for (uint32_t d = 0; d < dims && in_.ok(); ++d) {
    ap.free[d].stride = in_.Read<int32_t>("free dim stride");
    ap.free[d].count = in_.Read<uint32_t>("free dim count");
    if (in_.ok() && ap.free[d].count == 0) in_.Fail("free dim " + std::to_string(d) + " has count 0");
    const int64_t extent = static_cast<int64_t>(ap.free[d].stride) * (static_cast<int64_t>(ap.free[d].count) - 1);
    (extent < 0 ? low : high) += extent;
  }
  if (!in_.ok()) return ap;
  const int start = ap.partition_start, count = ap.partition_count;
  std::string rule;
  if (count < 1 || start + count > 128) {
    rule = "partitions must lie in 0..127";
  } else if (count > 64 && start != 0) {
    rule = "a tile of more than 64 partitions starts at 0";
  } else if (count > 32 && count <= 64 && start != 0 && start != 64) {
    rule = "a tile of 33..64 partitions starts at 0 or 64";
  } else if (count <= 32 && start % 32 != 0) {
    rule = "a tile of at most 32 partitions starts at 0, 32, 64 or 96";
  }
  if (!rule.empty()) {
    in_.Fail(at, "tile partitions start " + std::to_string(start) + " count " + std::to_string(count) + ": " + rule);
    return ap;
  }
  const int64_t size = DTypeSize(ap.dtype);
  const int64_t first = ap.byte_offset + low * size, end = ap.byte_offset + (high + 1) * size;
  const TargetSpec& t = *program_->target;
  const int64_t capacity = ap.memory == Memory::kSbuf ? t.sbuf_bytes_per_partition : t.psum_banks * t.psum_bank_bytes;
  if (first < 0 || end > capacity) {
    in_.Fail(at, std::string(ap.memory == Memory::kSbuf ? "SBUF" : "PSUM") + " access pattern covers bytes [" + std::to_string(first) + ", " +
                     std::to_string(end) + ") of a partition, outside [0, " + std::to_string(capacity) + ")");
  }
  return ap;
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
  if (in_.ok() && kind > 1) in_.Fail(at, "scalar operand kind " + std::to_string(kind) + " (expected 0 immediate or 1 tile)");
  s.is_tile = kind == 1;
  if (s.is_tile) {
    s.tile = ReadTile();
  } else {
    s.immediate = ReadScalar();
  }
  return s;
}

Endpoint Parser::ReadEndpoint() {
  Endpoint e{};
  const size_t at = in_.offset();
  const uint8_t kind = in_.Read<uint8_t>("DMA endpoint kind");
  if (in_.ok() && kind > 1) in_.Fail(at, "DMA endpoint kind " + std::to_string(kind) + " (expected 0 HBM or 1 tile)");
  e.is_tile = kind == 1;
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

// A u8 that must be 0 or 1.
bool Parser::ReadFlag(const char* what) {
  const size_t at = in_.offset();
  const uint8_t value = in_.Read<uint8_t>(what);
  if (in_.ok() && value > 1) in_.Fail(at, std::string(what) + " " + std::to_string(value) + " (expected 0 or 1)");
  return value == 1;
}

}  // namespace

StatusOr<std::unique_ptr<Program>> ParseProgram(const uint8_t* data, size_t size) {
  if (data == nullptr && size != 0) return InvalidArgument("program bytes are null");
  return Parser(data, size).Parse();
}

}  // namespace trn::sim
