// The program loader's parser, shared by program_loader.cc (the program's structure: header,
// tensors, blocks, streams) and operand_parser.cc (each opcode's operands). Internal to the loader.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "byte_cursor.h"
#include "program.h"

namespace trn::sim::loader {

// No dimension or tensor may be large enough for element arithmetic to overflow int64.
constexpr int64_t kMaxElements = int64_t{1} << 48;
// The largest core rank a collective may name (TRN_CHIPS up to 64 chips x 8 cores).
constexpr int64_t kMaxCollectiveRank = 511;

// What is wrong with where a tile lies (its partition rules, its bytes inside its memory), or
// "" when nothing is: the one placement check of a read tile and of a loop's moved tiles.
std::string TilePlacementError(const TargetSpec& target, const TileAP& ap);

class Parser {
 public:
  Parser(const uint8_t* data, size_t size) : in_(data, size) {}
  StatusOr<std::unique_ptr<Program>> Parse();

 private:
  void ParseTensors();
  void ParseBlocks();
  void ParseStreams(Block& block);
  void ParseLoops(Block& block, int stream);
  void ParseExit(Block& block);
  Status CheckBlocks() const;
  Status CheckLoops(size_t b) const;
  Status CheckTileSteps(const Block& block, int s, size_t index, const std::vector<int>& chain) const;
  std::string StreamsOfCores() const;
  Instruction ParseInstruction(int stream, const std::string& where);  // where: "DVE instruction 3"
  Operands ParseOperands(Opcode opcode);
  DType ReadDType(const char* what, bool allow_f64, bool allow_table_only = false);
  AluOp ReadAluOp();
  TileAP ReadTile();
  HbmAP ReadHbm();
  Scalar ReadScalar();
  ScalarOperand ReadScalarOperand();
  Endpoint ReadEndpoint();
  std::vector<HbmAP> ReadHbmList();
  // An affine value of tile coordinates: base, partition step, a count of free steps, the steps.
  void ReadAffine(int64_t& base, int64_t& partition_step, std::vector<int64_t>& free_steps);
  uint8_t ReadFlag(const char* what);
  Collective ReadCollective();
  RegionProgram ReadRegion();

  Cursor in_;
  uint32_t version_ = 0;
  std::string block_name_;  // "block 3 " while parsing blocks of a multi-block program
  std::unique_ptr<Program> program_ = std::make_unique<Program>();
};

}  // namespace trn::sim::loader
