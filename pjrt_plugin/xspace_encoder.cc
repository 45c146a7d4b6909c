#include "xspace_encoder.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <tuple>

#include "protobuf_wire.h"
#include "sim/program.h"

namespace trn::pjrt {
namespace {

// Field numbers of tsl/profiler/protobuf/xplane.proto (package tensorflow.profiler).
enum XSpaceField { kSpacePlanes = 1 };
enum XPlaneField {
  kPlaneId = 1, kPlaneName = 2, kPlaneLines = 3, kPlaneEventMetadata = 4,
  kPlaneStatMetadata = 5, kPlaneStats = 6,
};
enum XLineField {
  kLineId = 1, kLineName = 2, kLineTimestampNs = 3, kLineEvents = 4, kLineDurationPs = 9,
  kLineDisplayId = 10, kLineDisplayName = 11,
};
enum XEventField { kEventMetadataId = 1, kEventOffsetPs = 2, kEventDurationPs = 3, kEventStats = 4 };
enum XStatField { kStatMetadataId = 1, kStatInt64 = 4, kStatString = 5 };
enum XEventMetadataField { kEventMetaId = 1, kEventMetaName = 2, kEventMetaStats = 5 };
enum XStatMetadataField { kStatMetaId = 1, kStatMetaName = 2 };
enum MapEntryField { kMapKey = 1, kMapValue = 2 };  // a map<int64, M> is repeated {key, value}

// TSL's prefix for devices that are neither GPU nor TPU: the trace-event conversion behind
// TensorBoard's trace viewer and jax.profiler's Perfetto trace keeps only planes it knows.
constexpr const char* kPlanePrefix = "/device:CUSTOM:";
constexpr int kExecutionsLine = 100;  // after every stream's line

int64_t Picoseconds(double ns) { return std::llround(ns * 1000.0); }

// "jit_f" from the StableHLO text's "module @jit_f"; "program" when it has none.
std::string ModuleName(const sim::LoadedProgram* program) {
  if (program == nullptr) return "program";
  const std::string& text = program->source();
  const size_t at = text.find("module @");
  if (at == std::string::npos) return "program";
  size_t end = at + 8;
  while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) ||
                               text[end] == '_' || text[end] == '.' || text[end] == '$' ||
                               text[end] == '-')) {
    ++end;
  }
  return end > at + 8 ? text.substr(at + 8, end - at - 8) : "program";
}

// A stream's line id, which trace viewers also take for its position (and its thread id):
// engines first, as AWS's profiler lists them, then the DMA queues (jax_trn/profile.py's order).
// From 1: the trace-event conversion leaves thread 0 unnamed.
int LineId(int stream) {
  static const std::string kEngines[] = {"PE", "ACT", "DVE", "POOL", "SP"};
  const std::string name = sim::StreamName(stream);
  for (int i = 0; i < 5; ++i) {
    if (name == kEngines[i]) return 1 + i;
  }
  return 1 + 5 + (stream - sim::kFirstDmaStream);
}

std::string DisplayName(int stream) {
  const std::string name = sim::StreamName(stream);
  if (name == "PE") return "PE (TensorE)";
  if (name == "ACT") return "ACT (ScalarE)";
  if (name == "DVE") return "DVE (VectorE)";
  if (name == "POOL") return "POOL (GpSimdE)";
  if (name == "SP") return "SP (SyncE)";
  return name + " (DMA queue)";
}

// One device's plane: interns stat and event metadata as events refer to them.
class PlaneBuilder {
 public:
  // The plane's lines start at `origin_ns` (host clock); an execution is placed `base_ps` after.
  explicit PlaneBuilder(int64_t origin_ns) : origin_ns_(origin_ns) {}

  void Add(const CapturedExecution& execution, int64_t base_ps) {
    const sim::ExecutionProfile& profile = *execution.profile;
    const sim::LoadedProgram* program = profile.program.get();
    for (const sim::InstructionRecord& r : profile.timeline) {
      const double busy_end = r.busy_end_ns >= 0 ? r.busy_end_ns : r.end_ns;
      std::string event;
      AppendVarintField(event, kEventMetadataId, InstructionMetadata(program, r));
      AppendVarintField(event, kEventOffsetPs, base_ps + Picoseconds(r.start_ns));
      AppendVarintField(event, kEventDurationPs, Picoseconds(busy_end - r.start_ns));
      if (r.bytes != 0) AppendIntStat(event, kEventStats, "bytes", r.bytes);
      if (r.hbm_bytes != 0) AppendIntStat(event, kEventStats, "hbm_bytes", r.hbm_bytes);
      if (r.flops != 0) AppendIntStat(event, kEventStats, "flops", r.flops);
      AppendBytesField(lines_[r.stream], kLineEvents, event);
      last_end_ps_ = std::max(last_end_ps_, base_ps + Picoseconds(busy_end));
    }
    std::string event;
    AppendVarintField(event, kEventMetadataId, ExecutionMetadata(program));
    AppendVarintField(event, kEventOffsetPs, base_ps);
    AppendVarintField(event, kEventDurationPs, Picoseconds(profile.device_time_ns));
    AppendIntStat(event, kEventStats, "host_start_ns", execution.host_start_ns);
    AppendIntStat(event, kEventStats, "matmul_flops", profile.matmul_flops);
    AppendIntStat(event, kEventStats, "hbm_bytes", profile.hbm_bytes);
    if (!execution.timeline_recorded) {
      AppendStringStat(event, kEventStats, "note",
                       "queued before the trace started: no per-instruction timeline");
    }
    AppendBytesField(executions_, kLineEvents, event);
    last_end_ps_ = std::max(last_end_ps_, base_ps + Picoseconds(profile.device_time_ns));
    if (target_.empty() && program != nullptr) target_ = program->target().name;
  }

  std::string Finish(int device_id, const std::string& device_name) {
    std::string plane;
    AppendVarintField(plane, kPlaneId, static_cast<uint64_t>(device_id));
    AppendBytesField(plane, kPlaneName, kPlanePrefix + std::to_string(device_id));
    const int64_t timestamp = origin_ns_;
    std::vector<int> streams;
    for (const auto& [stream, events] : lines_) streams.push_back(stream);
    std::sort(streams.begin(), streams.end(),
              [](int a, int b) { return LineId(a) < LineId(b); });
    for (int stream : streams) {
      AppendLine(plane, LineId(stream), sim::StreamName(stream), DisplayName(stream), timestamp,
                 lines_[stream]);
    }
    AppendLine(plane, kExecutionsLine, "Executions", "Executions", timestamp, executions_);
    AppendIntStat(plane, kPlaneStats, "device_id", device_id);
    AppendStringStat(plane, kPlaneStats, "device", device_name);
    AppendStringStat(plane, kPlaneStats, "target", target_);
    AppendStringStat(plane, kPlaneStats, "times",
                     "modeled by the jax-trn timing model (estimates, not measurements)");
    for (const std::string& entry : event_metadata_) AppendBytesField(plane, kPlaneEventMetadata, entry);
    for (const auto& [name, id] : stat_ids_) {
      std::string metadata;
      AppendVarintField(metadata, kStatMetaId, static_cast<uint64_t>(id));
      AppendBytesField(metadata, kStatMetaName, name);
      AppendBytesField(plane, kPlaneStatMetadata, MapEntry(id, metadata));
    }
    return plane;
  }

 private:
  static std::string MapEntry(int64_t key, const std::string& value) {
    std::string entry;
    AppendVarintField(entry, kMapKey, static_cast<uint64_t>(key));
    AppendBytesField(entry, kMapValue, value);
    return entry;
  }

  void AppendLine(std::string& plane, int id, const std::string& name,
                  const std::string& display_name, int64_t timestamp_ns, const std::string& events) {
    std::string line;
    AppendVarintField(line, kLineId, static_cast<uint64_t>(id));
    AppendBytesField(line, kLineName, name);
    AppendVarintField(line, kLineTimestampNs, static_cast<uint64_t>(timestamp_ns));
    line += events;  // already framed as repeated field kLineEvents
    AppendVarintField(line, kLineDurationPs, static_cast<uint64_t>(last_end_ps_));
    AppendVarintField(line, kLineDisplayId, static_cast<uint64_t>(id));
    AppendBytesField(line, kLineDisplayName, display_name);
    AppendBytesField(plane, kPlaneLines, line);
  }

  int64_t StatId(const std::string& name) {
    auto [it, added] = stat_ids_.emplace(name, static_cast<int64_t>(stat_ids_.size()) + 1);
    return it->second;
  }

  void AppendIntStat(std::string& out, int field, const std::string& name, int64_t value) {
    std::string stat;
    AppendVarintField(stat, kStatMetadataId, static_cast<uint64_t>(StatId(name)));
    AppendVarintField(stat, kStatInt64, static_cast<uint64_t>(value));  // two's complement
    AppendBytesField(out, field, stat);
  }

  void AppendStringStat(std::string& out, int field, const std::string& name,
                        const std::string& value) {
    std::string stat;
    AppendVarintField(stat, kStatMetadataId, static_cast<uint64_t>(StatId(name)));
    AppendBytesField(stat, kStatString, value);
    AppendBytesField(out, field, stat);
  }

  // An event metadata entry (as a map entry of the plane) named `name`, with string stats.
  int64_t NewMetadata(const std::string& name,
                      const std::vector<std::pair<std::string, std::string>>& stats) {
    const auto id = static_cast<int64_t>(event_metadata_.size()) + 1;
    std::string metadata;
    AppendVarintField(metadata, kEventMetaId, static_cast<uint64_t>(id));
    AppendBytesField(metadata, kEventMetaName, name);
    for (const auto& [stat, value] : stats) {
      if (!value.empty()) AppendStringStat(metadata, kEventMetaStats, stat, value);
    }
    event_metadata_.push_back(MapEntry(id, metadata));
    return id;
  }

  // One metadata per (program, op, opcode): what every instruction of that op and opcode shares.
  int64_t InstructionMetadata(const sim::LoadedProgram* program, const sim::InstructionRecord& r) {
    const auto key = std::make_tuple(program, r.debug_id, r.opcode);
    auto found = instruction_metadata_.find(key);
    if (found != instruction_metadata_.end()) return found->second;
    const std::string opcode = sim::OpcodeName(r.opcode);
    const std::vector<sim::DebugInfo>* debug = program ? &program->program().debug : nullptr;
    const sim::DebugInfo* d =
        debug != nullptr && r.debug_id < debug->size() ? &(*debug)[r.debug_id] : nullptr;
    std::string name = opcode;
    if (d != nullptr && !d->name.empty()) {
      name = d->name;
    } else if (d != nullptr && !d->op.empty()) {
      name = d->op;
    }
    const int64_t id = NewMetadata(
        name, {{"opcode", opcode},
               {"stablehlo_op", d ? d->op : ""},
               {"source", d ? d->location : ""},
               {"lowering", d ? d->lowering : ""}});
    instruction_metadata_.emplace(key, id);
    return id;
  }

  int64_t ExecutionMetadata(const sim::LoadedProgram* program) {
    auto found = execution_metadata_.find(program);
    if (found != execution_metadata_.end()) return found->second;
    const int64_t id = NewMetadata(ModuleName(program), {});
    execution_metadata_.emplace(program, id);
    return id;
  }

  int64_t origin_ns_;        // host time of the plane's first execution: its lines' timestamp
  int64_t last_end_ps_ = 0;  // the plane's last modeled end, from the origin
  std::string target_;
  std::map<int, std::string> lines_;  // by stream: the encoded events
  std::string executions_;            // the Executions line's encoded events
  std::map<std::string, int64_t> stat_ids_;
  std::vector<std::string> event_metadata_;  // encoded map entries, id = index + 1
  std::map<std::tuple<const sim::LoadedProgram*, uint32_t, uint16_t>, int64_t> instruction_metadata_;
  std::map<const sim::LoadedProgram*, int64_t> execution_metadata_;
};

}  // namespace

std::string EncodeXSpace(const std::vector<CapturedExecution>& executions) {
  std::map<int, std::vector<const CapturedExecution*>> by_device;
  for (const CapturedExecution& e : executions) by_device[e.device_id].push_back(&e);
  std::string space;
  for (auto& [device_id, runs] : by_device) {
    std::stable_sort(runs.begin(), runs.end(), [](const auto* a, const auto* b) {
      return a->host_start_ns < b->host_start_ns;
    });
    const int64_t origin_ns = runs.front()->host_start_ns;
    PlaneBuilder plane(origin_ns);
    int64_t device_free_ps = 0;  // when the previous execution ended in modeled time
    for (const CapturedExecution* run : runs) {
      const int64_t start_ps = std::max((run->host_start_ns - origin_ns) * 1000, device_free_ps);
      plane.Add(*run, start_ps);
      device_free_ps = start_ps + Picoseconds(run->profile->device_time_ns);
    }
    AppendBytesField(space, kSpacePlanes, plane.Finish(device_id, runs.front()->device_name));
  }
  return space;
}

}  // namespace trn::pjrt
