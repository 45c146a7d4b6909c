// The in-memory NeuronCore program (docs/program-format.md), as program_loader.cc builds it:
// every index, bound and partition rule already checked, so engines trust what they read.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "alu.h"
#include "dtype.h"
#include "region_program.h"
#include "runtime.h"
#include "target_spec.h"

namespace trn::sim {

// The numbered vocabularies are isa.def's tables.
enum class TensorKind : uint8_t {
#define TRN_TENSOR_KIND(Camel, snake, code) k##Camel = code,
#include "isa.def"
};

enum class Memory : uint8_t {
#define TRN_MEMORY(Camel, snake, code) k##Camel = code,
#include "isa.def"
};

// Operand kind tags (docs/program-format.md): a DMA endpoint is an HBM or a tile access pattern;
// a scalar operand an immediate or a per-partition tile.
enum class EndpointKind : uint8_t {
#define TRN_ENDPOINT_KIND(Camel, snake, code) k##Camel = code,
#include "isa.def"
};

enum class ScalarKind : uint8_t {
#define TRN_SCALAR_KIND(Camel, snake, code) k##Camel = code,
#include "isa.def"
};

// What activation_reduce sums into dst_sum (isa.def).
enum class RowSum : uint8_t {
#define TRN_ROW_SUM(Camel, snake, code) k##Camel = code,
#include "isa.def"
};

enum class Opcode : uint16_t {
#define TRN_OPCODE(Camel, snake, code, engine) k##Camel = code,
#include "isa.def"
};

// "matmul", ...; "opcode(N)" for a number the format does not define.
TRN_API std::string OpcodeName(uint16_t opcode);

// Stream ids of the engines (docs/program-format.md); the DMA streams follow (runtime.h).
#define TRN_ENGINE_STREAM(NAME, code) constexpr int kStream##NAME = code;
#include "isa.def"

struct Tensor {
  std::string name;
  TensorKind kind;
  uint32_t index;
  uint32_t output = 0;  // a donated parameter: the output that reuses its buffer
  DType dtype;
  std::vector<int64_t> shape;
  int64_t num_elements;
  int64_t byte_size;
  std::vector<uint8_t> data;  // constants only
  // Declared c64 [d...] in the table (parameters and outputs): loaded as f32 [d..., 2], the
  // interleaved (real, imaginary) pairs, so every access pattern reads it as float32.
  bool complex_pairs = false;
  // Declared s4 / u4 in the table (parameters and outputs): loaded as s8 / u8, the same bytes
  // (one value per byte, in its low nibble).
  bool nibbles = false;
};

struct FreeDim {
  int32_t stride;  // elements
  uint32_t count;
};

struct TileAP {
  Memory memory;
  DType dtype;
  uint16_t partition_start;
  uint16_t partition_count;
  uint32_t byte_offset;
  int num_free;
  std::array<FreeDim, 4> free;

  int64_t free_size() const;
  int64_t num_elements() const { return partition_count * free_size(); }
  bool contiguous() const;  // innermost stride 1 and dims nest densely
};

struct HbmDim {
  int64_t stride;  // elements; 0 broadcasts, negative reverses
  int64_t count;
};

struct HbmAP {
  uint32_t tensor;
  int64_t offset;  // elements
  int num_dims;
  std::array<HbmDim, 8> dims;

  int64_t num_elements() const;
};

struct Scalar {
  DType dtype;
  double float_value;  // float dtypes
  int64_t int_value;   // integer dtypes (u64 as its bit pattern)
};

struct ScalarOperand {
  bool is_tile;
  Scalar immediate;
  TileAP tile;  // [P, 1]
};

struct Endpoint {
  bool is_tile;
  HbmAP hbm;
  TileAP tile;
};

struct Wait {
  uint8_t stream;
  uint32_t count;
};

struct DmaCopy { Endpoint dst, src; };
struct Matmul { TileAP dst, stationary, moving; bool start, stop; };
struct Transpose { TileAP dst, src; };
struct TensorTensor { AluOp op; TileAP dst, a, b; };
struct TensorScalar { AluOp op; bool reverse; TileAP dst, src; ScalarOperand scalar; };
struct TensorReduce { AluOp op; TileAP dst, src; };
struct TensorCopy { TileAP dst, src; };
struct TensorTernary { AluOp op; TileAP dst, a, b, c; };
struct TensorUnary { AluOp op; TileAP dst, src; };
// dst = (data op0 operand0) op1 operand1; reverse0: operand0 op0 data; reverse1: operand1 op1 (...).
struct ScalarTensorTensor {
  AluOp op0, op1;
  bool reverse0, reverse1;
  TileAP dst, data, operand1;
  ScalarOperand operand0;
};
// dst[p] = (count, mean, count · variance) of src[p]'s even elements, then of its odd ones.
struct BnStats { TileAP dst, src; };
// dst[p] = (mean, variance) of the (count, mean, count · variance) tuples along src[p].
struct BnAggr { TileAP dst, src; };
struct Activation { AluOp func; TileAP dst, src; float scale; ScalarOperand bias; };
// dst = func(src · scale + bias) with scale an immediate or [P, 1]; unless sum_of is kNone,
// dst_sum[p] is the fp32 sum of row p's values (tensor_reduce add's order: element 0 first).
struct ActivationReduce {
  AluOp func; TileAP dst, src; ScalarOperand scale, bias; RowSum sum_of; TileAP dst_sum;
  bool has_sum() const { return sum_of != RowSum::kNone; }
};
struct GpElementwise { AluOp op; HbmAP dst; std::vector<HbmAP> srcs; };
struct GpCopy { HbmAP dst, src; };
struct GpFill { HbmAP dst; Scalar value; };
struct GpIota { HbmAP dst; int dim; };
// dst[p, i...] = base + p·partition_step + Σ i_d·free_steps[d] (as int64, then dst's dtype).
struct Iota { TileAP dst; int64_t base; int64_t partition_step; std::vector<int64_t> free_steps; };
// dst = (the affine value above, op: a compare) CMP 0 ? src : fill.
struct AffineSelect {
  AluOp op; TileAP dst, src; int64_t base; int64_t partition_step; std::vector<int64_t> free_steps; Scalar fill;
};
struct GpBitcast { uint32_t dst, src; };
struct GpReduce { AluOp op; HbmAP dst, src; int reduced; Scalar init; };
struct GpBatchMatmul { HbmAP dst, lhs, rhs; };
// dst [N, S...] = windows of src [D...] at indices [N, rank(src)], starts clamped to [0, D - S].
struct GpGather { HbmAP dst, src, indices; };
// Windows updates [N, S...] combined (op: copy, add, max, min, mul) into dst [D...] at indices;
// clamp: starts clamped like gp_gather; otherwise a window not wholly inside dst is skipped.
struct GpScatter { AluOp op; bool clamp; HbmAP dst, updates, indices; };
struct GpArgReduce {
  AluOp op;  // kMax or kMin
  bool select_form;  // XLA's select body (torch_xla); otherwise JAX's comparator
  HbmAP dst_value, dst_index, src_value, src_index;
  int reduced;
  Scalar init_value, init_index;
};
// canonical_floats: -0.0 == +0.0 and every NaN equal and after +inf (JAX's sort comparator);
// otherwise IEEE totalOrder on the bits.
struct GpSort { int num_keys; bool descending; bool canonical_floats; std::vector<HbmAP> dsts, srcs; };
// One dim of a sliding window (docs/program-format.md, gp_reduce_window): window size, stride,
// base and window dilation, low and high padding of the dilated base.
struct WindowDim { int64_t size, stride, base_dilation, window_dilation, pad_low, pad_high; };
// dst[o] = init, folded with op over the valid positions of o's window of src (padding and
// base-dilation holes are skipped), rounded to dst's dtype after each step.
struct GpReduceWindow { AluOp op; HbmAP dst, src; Scalar init; std::vector<WindowDim> windows; };
// dst = init; for each element s of source: the window position of operand picked by `select`
// (a compare: keep the current pick while select(current, candidate) holds) gets op(dst, source[s]).
struct GpSelectAndScatter { AluOp select, op; HbmAP dst, operand, source; Scalar init; std::vector<WindowDim> windows; };
// The gp_region_* ops (docs/program-format.md): `region` is the body, its arguments the
// accumulators (or current destination values) first, then the elements combined into them.
// dsts[i] [K...] = inits[i] [K...] folded with region over srcs[i] [K..., R...] (the last
// `reduced` dims, in row-major order).
struct GpRegionReduce { std::vector<HbmAP> dsts, srcs, inits; int reduced; RegionProgram region; };
// gp_reduce_window's windows over several operands, folded with region from inits [out dims].
struct GpRegionReduceWindow { std::vector<HbmAP> dsts, srcs, inits; std::vector<WindowDim> windows; RegionProgram region; };
// For each row n of updates[i] [N, S...] in order: the window of every dsts[i] at indices[n, :]
// becomes region(window values..., update values...); a window not wholly inside is skipped.
struct GpRegionScatter { std::vector<HbmAP> dsts, updates; HbmAP indices; RegionProgram region; };
// A stable sort along the last dim of every operand by the comparator region (2n arguments:
// the lhs element of each operand, then the rhs's; returns pred "lhs before rhs").
struct GpRegionSort { std::vector<HbmAP> dsts, srcs; RegionProgram region; };
// One spatial dim of gp_convolution's window (docs/program-format.md).
struct ConvWindowDim { int64_t stride, pad_low, lhs_dilation, rhs_dilation; };
// dst [N/batch_groups, O, Y...] = lhs [N, C, X...] (*) rhs [O, C/feature_groups, K...].
struct GpConvolution {
  int64_t feature_groups, batch_groups;
  std::vector<ConvWindowDim> window;  // one per spatial dim
  HbmAP dst, lhs, rhs;
};

// Between the cores of one execution (collectives.h): `groups` are the participating ranks, each
// group listed in order (the fold order of a reduction); `pairs` collective_permute's
// (source, target) ranks. dim: all_gather/reduce_scatter's dim, all_to_all's split dim.
struct Collective {
  uint8_t kind;       // kCollective* (isa.def)
  uint8_t algorithm;  // kCollectiveRing, kCollectiveHalvingDoubling, kCollectiveHierarchical
  AluOp op;           // all_reduce / reduce_scatter's combiner
  int dim, concat_dim;
  uint32_t channel;
  std::vector<std::vector<int64_t>> groups;
  std::vector<std::pair<int64_t, int64_t>> pairs;
  HbmAP dst, src;
};
// dst (one u32) = the rank of the executing core in its execution.
struct PartitionId { HbmAP dst; };
// The host runs the callback registered under `callback` (host_callback.h) on the bytes of srcs
// and fills dsts with its results.
struct HostCallback { uint64_t callback; std::vector<HbmAP> dsts, srcs; };

using Operands = std::variant<DmaCopy, Matmul, Transpose, TensorTensor, TensorScalar,
                              TensorReduce, TensorCopy, TensorTernary, TensorUnary, ScalarTensorTensor, BnStats, BnAggr, Activation, ActivationReduce,
                              GpElementwise, GpCopy, GpFill, GpIota, GpBitcast, GpReduce,
                              GpBatchMatmul, GpGather, GpScatter, GpArgReduce, GpSort,
                              GpConvolution, GpReduceWindow, GpSelectAndScatter, Collective,
                              PartitionId, HostCallback, Iota, AffineSelect, GpRegionReduce,
                              GpRegionReduceWindow, GpRegionScatter, GpRegionSort>;

struct Instruction {
  Opcode opcode;
  uint32_t debug_id;
  std::vector<Wait> waits;
  Operands operands;
};

// Control opcodes: the SP (Sync) engine's control instruction that ends a block and picks the
// next one. They appear only as block exits, never inside a stream's instruction list.
enum class ControlOp : uint16_t {
#define TRN_CONTROL_OP(Camel, snake, code) k##Camel = code,
#include "isa.def"
};

// The end of a block (docs/program-format.md "Blocks and control flow"): after every stream of
// the block has finished (a barrier), SP reads `selector` (branch: a predicate, switch: an
// index; one element) and every stream continues with block `targets[...]`.
struct BlockExit {
  ControlOp op = ControlOp::kEnd;
  uint32_t debug_id = 0;
  HbmAP selector{};               // branch / switch only
  std::vector<uint32_t> targets;  // jump: [next]; branch: [if_true, if_false]; switch: branches
};

// What changes per iteration in one instruction of a loop body (format version 4): iteration i
// waits for waits[k].count + wait_steps[k]·i, and its k-th HBM access pattern (operand encoding
// order, HbmAP::offset) starts hbm_steps[k].second·i elements further. In nested loops each
// enclosing loop has its own steps for the instruction, by that loop's counter.
// A tile operand's field that a loop steps (format version 7, step kind 3): iteration i adds
// Turns(i)·step to the stored (iteration 0's) value, Turns(i) = ((phase + i) mod period) − phase
// (period 0: i), so a buffer rotating every `period` iterations is one stepped tile.
enum class TileField : uint8_t { kByteOffset = 0, kPartitionStart = 1 };
struct TileStep {
  int operand;      // the tile operand's position in the instruction's encoding order
  TileField field;
  int64_t step;     // bytes (byte offset) or partitions (partition start) per turn
  uint32_t period;  // 0: no rotation
  uint32_t phase;   // < period: where iteration 0 stands in the rotation
  int64_t Turns(int64_t iteration) const {
    return period ? (phase + iteration) % period - phase : iteration;
  }
  // The least and the most Turns over iterations 0..count-1.
  std::pair<int64_t, int64_t> Span(int64_t count) const {
    if (period == 0 || phase + count - 1 < period) return {0, count - 1};
    return {-int64_t{phase}, int64_t{period} - 1 - phase};
  }
};

struct InstructionSteps {
  std::vector<int64_t> wait_steps;                     // one per wait (0: the same every iteration)
  std::vector<std::pair<int, int64_t>> hbm_steps;      // (HBM operand index, elements per iteration)
  int64_t base_step = 0;                               // added to an iota's or affine_select's base
  std::vector<TileStep> tile_steps;                    // tile operand fields (version 7)
  bool moves() const { return !hbm_steps.empty() || base_step != 0 || !tile_steps.empty(); }
};

// Loops nest at most this deep (the loader rejects deeper ones).
constexpr int kMaxLoopDepth = 8;

// A counted loop of one stream: its stored instructions [first, first + length) run `count`
// times in a row (docs/program-format.md "Loops"). The program is never expanded in memory.
// Loops nest: `parent` is the stream's loop whose body holds this one's (-1: none).
struct StreamLoop {
  uint32_t first = 0, length = 0, count = 0;
  int32_t parent = -1;
  std::vector<InstructionSteps> body;  // one per body instruction
};

// A block: one instruction list per stream (semaphore counts restart at 0 on entry), the
// streams' counted loops (sorted by first instruction, an enclosing loop before the loops it
// holds) and the block's exit.
struct Block {
  std::array<std::vector<Instruction>, kMaxStreams> streams;  // core 1's from kNumStreams on
  std::array<std::vector<StreamLoop>, kMaxStreams> loops;
  BlockExit exit;

  // Instructions stream `s` executes in one entry of the block (loops counted per iteration;
  // saturates at INT64_MAX).
  TRN_API int64_t ExecutedCount(int s) const;
  // The indices (in loops[s]) of the loops holding stored instruction `index`, outermost first.
  TRN_API std::vector<int> EnclosingLoops(int s, size_t index) const;
  // Stored instruction `index` of stream `s` as its `run`-th execution in one block entry runs it
  // (run: 0-based; in nested loops the iterations in mixed radix, the outermost most
  // significant): its waits, HBM offsets and bases moved.
  TRN_API Instruction AtRun(int s, size_t index, int64_t run) const;
};

// Iteration `iteration` of `inst` (whose steps are `steps`): its HBM offsets moved by the steps.
TRN_API Instruction AtIteration(const Instruction& inst, const InstructionSteps& steps, int64_t iteration);
// The HBM access patterns of an instruction's operands in their encoding order.
TRN_API std::vector<HbmAP*> HbmOperands(Operands& operands);
// The tile access patterns of an instruction's operands in their encoding order (a tile
// endpoint, a per-partition scalar tile and a present optional tile count; immediates do not).
TRN_API std::vector<TileAP*> TileOperands(Operands& operands);
// `tile` with `step` applied `turns` times (no range check: the loader's).
void MoveTile(TileAP& tile, const TileStep& step, int64_t turns);

// For error messages: "; stablehlo.add \"jit(f)/add\" at f.py:3:4" (what is known of the entry).
std::string DescribeDebug(const Program& program, uint32_t debug_id);

// "DVE instruction 3 (tensor_tensor; stablehlo.add \"jit(f)/add\" at f.py:3:4)", prefixed with
// "block B " in a program of several blocks.
std::string DescribeInstruction(const Program& program, size_t block, int stream, size_t index);

struct Program {
  const TargetSpec* target = nullptr;
  // Physical NeuronCores the program runs on (format version 6; 1 before): an LNC=2 device's
  // program may give work to both of its cores, each with its own engines, SBUF and PSUM, sharing
  // the device's HBM. Core c's streams are ids c * kNumStreams + s.
  int cores = 1;
  int num_streams() const { return cores * kNumStreams; }
  std::vector<Tensor> tensors;
  std::vector<Block> blocks;  // execution starts at blocks[0]; never empty once loaded
  // A copy of blocks[0].streams, for readers that predate blocks (the profiler's wait lookup).
  std::array<std::vector<Instruction>, kMaxStreams> streams;
  std::vector<DebugInfo> debug;
  // Where the debug table starts in the program bytes: it and the source text end the program, so
  // the compile cache can re-attach another request's source locations (jax_trn/compile_cache.py).
  size_t debug_offset = 0;
  std::string source;
};

}  // namespace trn::sim
