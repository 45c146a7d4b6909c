// jax_trn._native: Python access to the runtime without going through PJRT: the per-generation
// target table (the compiler's source of hardware constants), direct program execution on numpy
// arrays (simulator tests), program metadata, and each device's last execution profile (with the
// program's debug table, so jax_trn.profile can attribute time to ops and source lines).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstring>
#include <variant>

#include "sim/execution_index.h"
#include "sim/host_call_permit.h"
#include "sim/interconnect_timing.h"
#include "sim/program.h"
#include "sim/runtime.h"

namespace nb = nanobind;

namespace trn::sim {
namespace {

using ByteView = nb::ndarray<uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

[[noreturn]] void Raise(const Status& status) {
  if (status.code() == StatusCode::kInvalidArgument) throw nb::value_error(status.message().c_str());
  throw std::runtime_error(status.message());
}

nb::object NumpyDType(DType dtype) {
  nb::module_ numpy = nb::module_::import_("numpy");
  switch (dtype) {
    case DType::kBF16: return nb::module_::import_("ml_dtypes").attr("bfloat16");
    case DType::kF8E5M2: return nb::module_::import_("ml_dtypes").attr("float8_e5m2");
    case DType::kF8E4M3FN: return nb::module_::import_("ml_dtypes").attr("float8_e4m3fn");
    case DType::kPred: return numpy.attr("bool_");
    case DType::kC64: return numpy.attr("complex64");
    case DType::kS4: return nb::module_::import_("ml_dtypes").attr("int4");
    case DType::kU4: return nb::module_::import_("ml_dtypes").attr("uint4");
    default: break;
  }
  static const char* const kNames[] = {nullptr, nullptr, "int8", "int16", "int32", "int64", "uint8", "uint16",
                                       "uint32", "uint64", "float16", "float32", "float64"};
  return numpy.attr("dtype")(kNames[static_cast<int>(dtype)]);
}

// The bytes of a C-contiguous array as a flat uint8 view (works for ml_dtypes' dtypes, which the
// buffer protocol cannot describe directly).
ByteView Bytes(nb::handle array) {
  nb::object flat = array.attr("reshape")(-1).attr("view")(nb::module_::import_("numpy").attr("uint8"));
  return nb::cast<ByteView>(flat);
}

std::string Text(nb::handle value) {
  nb::object text = nb::steal(PyObject_Str(value.ptr()));
  if (!text.is_valid()) throw nb::python_error();
  return nb::cast<std::string>(text);
}

nb::tuple ShapeTuple(const std::vector<int64_t>& shape) {
  nb::list dims;
  for (int64_t d : shape) dims.append(d);
  return nb::tuple(dims);
}

std::shared_ptr<const LoadedProgram> LoadOrRaise(nb::bytes program) {
  auto loaded = LoadedProgram::Load(program.c_str(), program.size());
  if (!loaded.ok()) Raise(loaded.status());
  return loaded.value();
}

nb::dict ProfileDict(const ExecutionProfile& profile) {
  nb::dict out;
  out["device_time_ns"] = profile.device_time_ns;
  out["matmul_flops"] = profile.matmul_flops;
  out["fp8_matmul_flops"] = profile.fp8_matmul_flops;
  out["transpose_flops"] = profile.transpose_flops;
  out["hbm_bytes"] = profile.hbm_bytes;
  nb::dict streams;
  for (size_t s = 0; s < profile.stream_instructions.size(); ++s) {
    if (profile.stream_instructions[s] == 0) continue;
    nb::dict stream;
    stream["busy_ns"] = profile.stream_busy_ns[s];
    stream["instructions"] = profile.stream_instructions[s];
    streams[StreamName(static_cast<int>(s)).c_str()] = stream;
  }
  out["streams"] = streams;
  const Program* program = profile.program ? &profile.program->program() : nullptr;
  nb::list timeline;
  for (const InstructionRecord& r : profile.timeline) {
    nb::dict rec;
    rec["stream"] = StreamName(r.stream);
    rec["opcode"] = OpcodeName(r.opcode);
    rec["debug_id"] = r.debug_id;
    rec["start_ns"] = r.start_ns;
    rec["end_ns"] = r.end_ns;
    rec["busy_end_ns"] = r.busy_end_ns >= 0 ? r.busy_end_ns : r.end_ns;
    rec["index"] = r.index;
    rec["bytes"] = r.bytes;
    rec["flops"] = r.flops;
    rec["hbm_bytes"] = r.hbm_bytes;
    rec["fp8"] = r.fp8;
    if (r.collective.algorithm >= 0) {
      nb::dict collective;
      collective["algorithm"] = static_cast<int>(r.collective.algorithm);
      collective["group_size"] = r.collective.group_size;
      collective["peer_wait_ns"] = r.collective.peer_wait_ns;
      collective["link_utilization"] = r.collective.link_utilization;
      rec["collective"] = collective;
    }
    // The semaphore waits the instruction had: [(stream name, count)], count instructions of
    // that stream complete before it may start.
    nb::list waits;
    rec["block"] = r.block;
    const bool known = program != nullptr && r.block >= 0 &&
                       static_cast<size_t>(r.block) < program->blocks.size();
    const auto* insts = known ? &program->blocks[r.block].streams[r.stream % kMaxStreams] : nullptr;
    if (insts != nullptr && r.index >= 0 && r.stream < kMaxStreams &&
        static_cast<size_t>(r.index) < insts->size()) {
      // In a loop, the counts of the iteration that ran (`iteration`: the how-manieth run of the
      // stored instruction, the iterations of nested loops in mixed radix).
      const Block& block = program->blocks[r.block];
      const bool in_loop = !block.EnclosingLoops(r.stream, r.index).empty();
      if (in_loop) rec["iteration"] = r.iteration;  // only a loop's records have one
      const Instruction ran = in_loop ? block.AtRun(r.stream, r.index, r.iteration) : (*insts)[r.index];
      for (const Wait& w : ran.waits) {
        if (w.count > 0) waits.append(nb::make_tuple(StreamName(w.stream), uint64_t{w.count}));
      }
    }
    rec["waits"] = waits;
    timeline.append(rec);
  }
  out["timeline"] = timeline;
  // The program's debug table, indexed by debug_id: instruction -> StableHLO op -> source line.
  nb::list debug;
  if (program != nullptr) {
    for (const DebugInfo& d : program->debug) {
      nb::dict entry;
      entry["op"] = d.op;
      entry["name"] = d.name;
      entry["location"] = d.location;
      entry["lowering"] = d.lowering;
      entry["rule"] = d.rule;
      debug.append(entry);
    }
  }
  out["debug"] = debug;
  out["target"] = profile.program ? profile.program->target().name : std::string();
  return out;
}

nb::dict TargetSpecDict(const std::string& name) {
  const TargetSpec* t = FindTarget(name);
  if (t == nullptr) throw nb::value_error(("unknown target \"" + name + "\" (expected one of " + KnownTargets() + ")").c_str());
  nb::dict d;
  for (const TargetFigure& figure : TargetFigures(*t)) {
    std::visit([&](auto value) { d[figure.name] = value; }, figure.value);
  }
  return d;
}

// The interconnect timing model's nanoseconds for one collective instruction (its kind,
// algorithm, largest buffer and replica groups; every group's transfers share the links) for the
// members of its first group, with core r on chip chip_of_rank[r] of `target`: what a
// `collective` instruction of the same operands is charged once its group has arrived
// (benchmarks/all_reduce.py models sizes too large to run on the host with it).
double InterconnectNs(int kind, int algorithm, int64_t bytes, const std::vector<std::vector<int64_t>>& groups,
                      const std::vector<int>& chip_of_rank, const std::string& target) {
  const TargetSpec* t = FindTarget(target);
  if (t == nullptr) throw nb::value_error(("unknown target \"" + target + "\"").c_str());
  if (groups.empty() || groups.front().empty()) throw nb::value_error("interconnect_ns needs a non-empty group");
  Interconnect net;
  net.chip_of_rank = chip_of_rank;
  for (const auto& group : groups) {
    for (int64_t r : group) {
      if (r < 0 || r >= static_cast<int64_t>(chip_of_rank.size())) {
        throw nb::value_error(("rank " + std::to_string(r) + " has no chip in chip_of_rank").c_str());
      }
    }
  }
  StatusOr<ChipTopology> topology = TopologyOf(*t, 1 + *std::max_element(chip_of_rank.begin(), chip_of_rank.end()));
  if (!topology.ok()) throw nb::value_error(topology.status().message().c_str());
  net.topology = *topology;
  Collective c{};
  c.kind = static_cast<uint8_t>(kind);
  c.algorithm = static_cast<uint8_t>(algorithm);
  c.groups = groups;
  return CollectiveNs(c, bytes, groups.front(), net, *t);
}

// isa.def's tables as the C++ side compiled them, named by its name functions (DTypeName,
// AluOpName, OpcodeName, StreamName): tests/test_isa_table.py compares them with Python's enums.
nb::dict IsaTables() {
  nb::dict dtypes, dtype_sizes, alu_ops, alu_arities, opcodes, control_ops, memories, tensor_kinds,
      endpoint_kinds, scalar_kinds, row_sums, streams, constants;
#define TRN_DTYPE(Camel, snake, code, size, cls)                       \
  dtypes[DTypeName(DType::k##Camel).c_str()] = static_cast<int>(DType::k##Camel); \
  dtype_sizes[#snake] = DTypeSize(DType::k##Camel);
#define TRN_ALU_OP(Camel, snake, code, arity, data)                       \
  alu_ops[AluOpName(AluOp::k##Camel).c_str()] = static_cast<int>(AluOp::k##Camel); \
  alu_arities[#snake] = AluArity(static_cast<uint8_t>(AluOp::k##Camel));
#define TRN_OPCODE(Camel, snake, code, engine) \
  opcodes[OpcodeName(static_cast<uint16_t>(Opcode::k##Camel)).c_str()] = static_cast<int>(Opcode::k##Camel);
#define TRN_CONTROL_OP(Camel, snake, code) control_ops[#snake] = static_cast<int>(ControlOp::k##Camel);
#define TRN_MEMORY(Camel, snake, code) memories[#snake] = static_cast<int>(Memory::k##Camel);
#define TRN_TENSOR_KIND(Camel, snake, code) tensor_kinds[#snake] = static_cast<int>(TensorKind::k##Camel);
#define TRN_ENDPOINT_KIND(Camel, snake, code) endpoint_kinds[#snake] = static_cast<int>(EndpointKind::k##Camel);
#define TRN_SCALAR_KIND(Camel, snake, code) scalar_kinds[#snake] = static_cast<int>(ScalarKind::k##Camel);
#define TRN_ROW_SUM(Camel, snake, code) row_sums[#snake] = static_cast<int>(RowSum::k##Camel);
#define TRN_ISA_CONSTANT(Camel, SNAKE, value) constants[#SNAKE] = k##Camel;
#include "sim/isa.def"
  for (int s = 0; s < kNumStreams; ++s) streams[StreamName(s).c_str()] = s;
  nb::dict tables;
  tables["dtypes"] = dtypes;
  tables["dtype_sizes"] = dtype_sizes;
  tables["alu_ops"] = alu_ops;
  tables["alu_arities"] = alu_arities;
  tables["opcodes"] = opcodes;
  tables["control_ops"] = control_ops;
  tables["memories"] = memories;
  tables["tensor_kinds"] = tensor_kinds;
  tables["endpoint_kinds"] = endpoint_kinds;
  tables["scalar_kinds"] = scalar_kinds;
  tables["row_sums"] = row_sums;
  tables["streams"] = streams;
  tables["constants"] = constants;
  return tables;
}

nb::tuple RunProgram(nb::bytes program, nb::list inputs, bool record_timeline) {
  const auto loaded = LoadOrRaise(program);
  const auto& params = loaded->parameters();
  if (inputs.size() != params.size()) {
    throw nb::value_error(("program takes " + std::to_string(params.size()) + " inputs, got " + std::to_string(inputs.size())).c_str());
  }
  nb::module_ numpy = nb::module_::import_("numpy");
  std::vector<nb::object> keep_alive;
  std::vector<const void*> parameter_ptrs;
  for (size_t i = 0; i < params.size(); ++i) {
    // asarray(order="C"), not ascontiguousarray: the latter turns a 0-d array into shape (1,).
    nb::object array = numpy.attr("asarray")(inputs[i], nb::arg("order") = "C");
    const nb::object expected = numpy.attr("dtype")(NumpyDType(params[i].dtype));
    if (!array.attr("dtype").equal(expected)) {
      throw nb::value_error(("input " + std::to_string(i) + " (" + params[i].name + ") has dtype " +
                             Text(array.attr("dtype")) + ", expected " + DTypeName(params[i].dtype)).c_str());
    }
    if (!array.attr("shape").equal(ShapeTuple(params[i].shape))) {
      throw nb::value_error(("input " + std::to_string(i) + " (" + params[i].name + ") has shape " +
                             Text(array.attr("shape")) + ", expected " +
                             Text(ShapeTuple(params[i].shape))).c_str());
    }
    ByteView bytes = Bytes(array);
    parameter_ptrs.push_back(bytes.data());
    keep_alive.push_back(array);
  }
  nb::list results;
  std::vector<void*> output_ptrs;
  for (const TensorInfo& out : loaded->outputs()) {
    nb::object array = numpy.attr("zeros")(ShapeTuple(out.shape), NumpyDType(out.dtype));
    output_ptrs.push_back(Bytes(array).data());
    results.append(array);
  }
  ExecutionProfile profile;
  ExecuteOptions options;
  options.record_timeline = record_timeline;
  Status status;
  {
    nb::gil_scoped_release release;
    status = Execute(*loaded, parameter_ptrs, output_ptrs, options, &profile);
  }
  if (!status.ok()) Raise(status);
  profile.program = loaded;
  return nb::make_tuple(results, ProfileDict(profile));
}

nb::list TensorList(const std::vector<TensorInfo>& tensors) {
  nb::list list;
  for (const TensorInfo& t : tensors) {
    nb::dict d;
    d["name"] = t.name;
    d["dtype"] = DTypeName(t.dtype);
    d["shape"] = ShapeTuple(t.shape);
    list.append(d);
  }
  return list;
}

nb::dict ProgramInfo(nb::bytes program) {
  const auto loaded = LoadOrRaise(program);
  nb::dict d;
  d["target"] = loaded->target().name;
  d["parameters"] = TensorList(loaded->parameters());
  d["outputs"] = TensorList(loaded->outputs());
  d["temporary_bytes"] = loaded->temporary_bytes();
  d["constant_bytes"] = loaded->constant_bytes();
  d["source"] = loaded->source();
  d["debug_offset"] = loaded->program().debug_offset;
  nb::list debug;
  for (const DebugInfo& entry : loaded->program().debug) {
    debug.append(nb::make_tuple(entry.op, entry.name, entry.location, entry.lowering, entry.rule));
  }
  d["debug"] = debug;
  return d;
}

// The latest completed execution on a device, of any live PJRT client (execution_index.h).
nb::object LastExecutionDict(int device_id) {
  const std::shared_ptr<const ExecutionProfile> profile = ExecutionIndex::LatestOfAnyClient(device_id);
  if (profile == nullptr) return nb::none();
  return ProfileDict(*profile);
}

}  // namespace
}  // namespace trn::sim

NB_MODULE(_native, m) {
  using namespace trn::sim;
  m.doc() = "jax-trn runtime bindings: target table, direct program execution, profiles";
  m.def("target_spec", &TargetSpecDict, nb::arg("name"), "The per-generation hardware constants of a target.");
  m.def("target_names", &TargetNames, "Every target's name (the target table's order).");
  m.def("interconnect_ns", &InterconnectNs, nb::arg("kind"), nb::arg("algorithm"), nb::arg("nbytes"),
        nb::arg("groups"), nb::arg("chip_of_rank"), nb::arg("target"),
        "The interconnect model's time of one collective (not a permute) for its first group.");
  m.def("isa_tables", &IsaTables, "isa.def's tables (name -> code) as the C++ side compiled them.");
  m.def("run_program", &RunProgram, nb::arg("program"), nb::arg("inputs"), nb::arg("record_timeline") = false,
        "Loads and runs program bytes on one simulated NeuronCore; returns (outputs, profile).");
  m.def("program_info", &ProgramInfo, nb::arg("program"), "Validates program bytes and describes their tensors.");
  m.def("stop_host_calls", &trn::sim::HostCallPermit::StopGranting, nb::call_guard<nb::gil_scoped_release>(),
        "Stops the plugin's calls into Python and waits for those pending (jax_trn's atexit hook).");
  m.def("last_execution", &LastExecutionDict, nb::arg("device_id"), "The profile of a device's most recent execution, or None.");
  m.def("set_record_timeline", &SetRecordTimeline, nb::arg("on"),
        "Turns per-instruction timeline recording on (nested: each True needs a False) for the "
        "executions that follow; TRN_PROFILE=1 turns it on for all.");
  m.def("record_timeline", &RecordTimelineRequested,
        "Whether executions now record their per-instruction timeline.");
  m.def("stream_names", []() {
    std::vector<std::string> names;
    for (int s = 0; s < kMaxStreams; ++s) names.push_back(StreamName(s));
    return names;
  }, "Names of the instruction streams, indexed by stream id.");
}
