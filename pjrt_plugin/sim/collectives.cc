#include "collectives.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "elementwise.h"
#include "interconnect_timing.h"
#include "strided_view.h"

namespace trn::sim {
namespace {

// A core waits this long for its peers unless TRN_COLLECTIVE_TIMEOUT_S says otherwise.
constexpr double kDefaultTimeoutS = 60.0;
// How often a waiting core checks whether its execution was cancelled.
constexpr auto kCancelPoll = std::chrono::milliseconds(50);

double TimeoutFromEnvironment() {
  if (const char* env = std::getenv("TRN_COLLECTIVE_TIMEOUT_S"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const double value = std::strtod(env, &end);
    if (end != env && *end == '\0' && value > 0) return value;
  }
  return kDefaultTimeoutS;
}

const char* KindName(uint8_t kind) {
  switch (kind) {
    case kCollectiveAllReduce: return "all_reduce";
    case kCollectiveAllGather: return "all_gather";
    case kCollectiveReduceScatter: return "reduce_scatter";
    case kCollectiveAllToAll: return "all_to_all";
    case kCollectivePermute: return "collective_permute";
    case kCollectiveBroadcast: return "collective_broadcast";
    default: return "collective";
  }
}

std::string ShapeText(DType dtype, const std::vector<int64_t>& shape) {
  std::string text = DTypeName(dtype) + "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

StridedView Dense(const std::vector<uint8_t>& bytes, DType dtype) {
  StridedView view;
  view.base = const_cast<uint8_t*>(bytes.data());
  view.dtype = dtype;
  view.rank = 1;
  view.stride_bytes[0] = DTypeSize(dtype);
  view.count[0] = static_cast<int64_t>(bytes.size()) / DTypeSize(dtype);
  return view;
}

// shape as [outer, shape[dim], inner] element counts.
void Split(const std::vector<int64_t>& shape, int dim, int64_t* outer, int64_t* inner) {
  *outer = 1;
  *inner = 1;
  for (int d = 0; d < dim; ++d) *outer *= shape[d];
  for (size_t d = dim + 1; d < shape.size(); ++d) *inner *= shape[d];
}

// Piece k of n along `dim` of a dense array.
std::vector<uint8_t> Chunk(const std::vector<uint8_t>& bytes, const std::vector<int64_t>& shape,
                           int dim, int64_t n, int64_t k, int esize) {
  int64_t outer, inner;
  Split(shape, dim, &outer, &inner);
  const int64_t row = shape[dim] / n * inner * esize;
  std::vector<uint8_t> out(outer * row);
  for (int64_t o = 0; o < outer; ++o) {
    std::memcpy(out.data() + o * row, bytes.data() + (o * n + k) * row, row);
  }
  return out;
}

// The pieces (each of `piece_shape`) concatenated along `dim`, in order.
std::vector<uint8_t> Concatenate(const std::vector<const std::vector<uint8_t>*>& pieces,
                                 const std::vector<int64_t>& piece_shape, int dim, int esize) {
  int64_t outer, inner;
  Split(piece_shape, dim, &outer, &inner);
  const int64_t row = piece_shape[dim] * inner * esize, n = static_cast<int64_t>(pieces.size());
  std::vector<uint8_t> out(outer * n * row);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = 0; k < n; ++k) {
      std::memcpy(out.data() + (o * n + k) * row, pieces[k]->data() + o * row, row);
    }
  }
  return out;
}

// Folds the group's operands with `op` in group order, rounding to the dtype after each step.
std::vector<uint8_t> Reduce(AluOp op, const std::vector<CollectiveContribution>& parts) {
  std::vector<uint8_t> acc = *parts[0].data;
  const StridedView view = Dense(acc, parts[0].dtype);
  for (size_t k = 1; k < parts.size(); ++k) {
    RunElementwise(op, view, {view, Dense(*parts[k].data, parts[k].dtype)});
  }
  return acc;
}

// The ranks that take part with `rank`: its replica group, or for collective_permute every rank
// named by a pair (empty when `rank` is in none). Every group is checked against the session.
StatusOr<std::vector<int64_t>> GroupOf(const Collective& c, int rank, int num_ranks) {
  std::vector<int64_t> found;
  if (c.kind == kCollectivePermute) {
    bool mine = false;
    for (const auto& [source, target] : c.pairs) {
      for (int64_t r : {source, target}) {
        if (r >= num_ranks) return InvalidArgument("collective_permute names core " + std::to_string(r) + " but the execution has " + std::to_string(num_ranks));
        if (std::find(found.begin(), found.end(), r) == found.end()) found.push_back(r);
        mine = mine || r == rank;
      }
    }
    if (!mine) return std::vector<int64_t>{};
    std::sort(found.begin(), found.end());
    return found;
  }
  for (const auto& group : c.groups) {
    for (int64_t r : group) {
      if (r >= num_ranks) return InvalidArgument(std::string(KindName(c.kind)) + " replica group names core " + std::to_string(r) + " but the execution has " + std::to_string(num_ranks) + " cores");
      if (r == rank) found = group;
    }
  }
  if (found.empty()) return InvalidArgument(std::string(KindName(c.kind)) + ": core " + std::to_string(rank) + " is in none of its replica groups");
  return found;
}

// The group's reduction, folded once for the whole group.
const std::vector<uint8_t>& Reduced(const Collective& c, const std::vector<CollectiveContribution>& parts,
                                    SharedReduction& shared) {
  std::call_once(shared.once, [&] { shared.bytes = Reduce(c.op, parts); });
  return shared.bytes;
}

// The result of core `rank` (at `position` in the group) from the group's operands.
std::vector<uint8_t> Combine(const Collective& c, int rank, size_t position,
                             const std::vector<int64_t>& group,
                             const std::vector<CollectiveContribution>& parts, SharedReduction& shared) {
  const int esize = DTypeSize(parts[0].dtype);
  const int64_t n = static_cast<int64_t>(parts.size());
  std::vector<const std::vector<uint8_t>*> pieces;
  switch (c.kind) {
    case kCollectiveAllReduce:
      return Reduced(c, parts, shared);
    case kCollectiveAllGather:
      for (const auto& p : parts) pieces.push_back(p.data.get());
      return Concatenate(pieces, parts[0].shape, c.dim, esize);
    case kCollectiveReduceScatter:
      return Chunk(Reduced(c, parts, shared), parts[0].shape, c.dim, n, static_cast<int64_t>(position), esize);
    case kCollectiveAllToAll: {
      std::vector<std::vector<uint8_t>> chunks;
      for (const auto& p : parts) chunks.push_back(Chunk(*p.data, p.shape, c.dim, n, static_cast<int64_t>(position), esize));
      std::vector<int64_t> chunk_shape = parts[0].shape;
      chunk_shape[c.dim] /= n;
      for (const auto& chunk : chunks) pieces.push_back(&chunk);
      return Concatenate(pieces, chunk_shape, c.concat_dim, esize);
    }
    case kCollectivePermute:
      for (const auto& [source, target] : c.pairs) {
        if (target != rank) continue;
        const size_t at = std::find(group.begin(), group.end(), source) - group.begin();
        return *parts[at].data;
      }
      return std::vector<uint8_t>(parts[position].data->size(), 0);  // no source: zeros
    default:  // collective_broadcast: the group's first member's operand
      return *parts[0].data;
  }
}

// Every member must have reached the same collective with the same operand.
Status CheckAgreement(const std::vector<int64_t>& group, const std::vector<CollectiveContribution>& parts,
                      const std::string& what) {
  for (size_t k = 1; k < parts.size(); ++k) {
    const auto &a = parts[0], &b = parts[k];
    if (a.kind != b.kind || a.channel != b.channel || a.debug_id != b.debug_id) {
      return FailedPrecondition("mismatched collectives across cores: core " + std::to_string(group[0]) + " reached " +
                                KindName(a.kind) + " channel " + std::to_string(a.channel) + " while core " +
                                std::to_string(group[k]) + " reached " + KindName(b.kind) + " channel " +
                                std::to_string(b.channel) + " (" + what + ")");
    }
    if (a.dtype != b.dtype || a.shape != b.shape) {
      return FailedPrecondition("mismatched collective shapes across cores in " + what + ": core " + std::to_string(group[0]) +
                                " has " + ShapeText(a.dtype, a.shape) + ", core " + std::to_string(group[k]) + " has " +
                                ShapeText(b.dtype, b.shape));
    }
  }
  return Status::Ok();
}

}  // namespace

CollectiveSession::CollectiveSession(Interconnect net, const TargetSpec& target, double timeout_s)
    : net_(std::move(net)), target_(target), timeout_s_(timeout_s > 0 ? timeout_s : TimeoutFromEnvironment()) {}

void CollectiveSession::Fail(int rank, const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failure_.empty()) failure_ = "core " + std::to_string(rank) + " failed: " + message;
  }
  cv_.notify_all();
}

StatusOr<std::vector<CollectiveContribution>> CollectiveSession::Exchange(
    int rank, int64_t sequence, const std::vector<int64_t>& group, CollectiveContribution mine,
    const std::string& what, const std::function<bool()>& cancelled,
    std::shared_ptr<SharedReduction>* reduction) {
  const auto key = std::make_pair(sequence, group.front());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
  std::unique_lock<std::mutex> lock(mu_);
  Slot& slot = slots_[key];
  slot.by_rank[rank] = std::move(mine);
  cv_.notify_all();
  while (slot.by_rank.size() < group.size()) {
    if (!failure_.empty()) {
      return Status(StatusCode::kAborted, "core " + std::to_string(rank) + " stopped waiting in " + what + ": " + failure_);
    }
    if (cancelled && cancelled()) return Status(StatusCode::kCancelled, "cancelled while core " + std::to_string(rank) + " waited in " + what);
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string missing;
      for (int64_t r : group) {
        if (slot.by_rank.count(r) == 0) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
      char seconds[32];
      std::snprintf(seconds, sizeof(seconds), "%g", timeout_s_);
      return Status(StatusCode::kDeadlineExceeded, "core " + std::to_string(rank) + " waited " + std::string(seconds) +
                                                       " s in " + what + " for core(s) " + missing +
                                                       " (TRN_COLLECTIVE_TIMEOUT_S sets the limit)");
    }
    cv_.wait_for(lock, kCancelPoll);
  }
  std::vector<CollectiveContribution> parts;
  for (int64_t r : group) parts.push_back(slot.by_rank.at(r));
  *reduction = slot.reduction;
  if (++slot.fetched == group.size()) slots_.erase(key);
  return parts;
}

StatusOr<InstructionTiming> RunCollective(Machine& machine, const Instruction& inst, double start_ns,
                                          const ExecuteOptions& options,
                                          InstructionRecord::Collective* stats) {
  const auto& c = std::get<Collective>(inst.operands);
  const int rank = machine.rank;
  const int num_ranks = machine.collectives != nullptr ? machine.collectives->num_ranks() : 1;
  const int64_t sequence = machine.collectives_run++;
  std::string where = DescribeDebug(machine.program, inst.debug_id);  // "; op "name" at file:line"
  if (where.rfind("; ", 0) == 0) where = where.substr(2);
  const std::string what = std::string(KindName(c.kind)) + (where.empty() ? "" : " (" + where + ")");
  StatusOr<std::vector<int64_t>> group = GroupOf(c, rank, num_ranks);
  if (!group.ok()) return Status(group.status().code(), group.status().message() + DescribeDebug(machine.program, inst.debug_id));
  const StridedView src = machine.View(c.src), dst = machine.View(c.dst);

  CollectiveContribution mine;
  auto data = std::make_shared<std::vector<uint8_t>>(src.num_elements() * DTypeSize(src.dtype));
  CopyBits(Dense(*data, src.dtype), src);
  mine.data = data;
  mine.shape.assign(src.count.begin(), src.count.begin() + src.rank);
  mine.dtype = src.dtype;
  mine.kind = c.kind;
  mine.channel = c.channel;
  mine.debug_id = inst.debug_id;
  mine.arrive_ns = start_ns;

  std::vector<CollectiveContribution> parts;
  auto reduction = std::make_shared<SharedReduction>();
  if (group->size() <= 1) {
    parts.push_back(mine);  // alone, or a core no permute pair names (its result is zeros)
  } else {
    StatusOr<std::vector<CollectiveContribution>> exchanged =
        machine.collectives->Exchange(rank, sequence, *group, mine, what, options.cancelled, &reduction);
    if (!exchanged.ok()) return exchanged.status();
    parts = std::move(*exchanged);
    TRN_RETURN_IF_ERROR(CheckAgreement(*group, parts, what));
  }
  const std::vector<int64_t> members = group->empty() ? std::vector<int64_t>{rank} : *group;
  const size_t position = std::find(members.begin(), members.end(), rank) - members.begin();
  std::vector<uint8_t> result = group->empty() ? std::vector<uint8_t>(data->size(), 0)
                                               : Combine(c, rank, position, members, parts, *reduction);
  CopyBits(dst, Dense(result, dst.dtype));

  double begin = start_ns;
  for (const auto& p : parts) begin = std::max(begin, p.arrive_ns);
  const int64_t bytes = static_cast<int64_t>(std::max(data->size(), result.size()));
  static const Interconnect kAlone{};
  const Interconnect& net = machine.collectives != nullptr ? machine.collectives->interconnect() : kAlone;
  const double collective_ns = CollectiveNs(c, bytes, members, net, *machine.program.target);
  const double end = begin + collective_ns;
  // The same algorithm on the same links at a size where latency vanishes gives the links'
  // own rate: the share of it this collective reached is its link utilization.
  constexpr double kLatencyFreeBytes = 1099511627776.0;  // 1 TiB
  const double latency_free_ns =
      CollectiveNs(c, static_cast<int64_t>(kLatencyFreeBytes), members, net, *machine.program.target);
  stats->algorithm = static_cast<int8_t>(c.algorithm);
  stats->group_size = static_cast<int32_t>(members.size());
  stats->peer_wait_ns = begin - start_ns;
  stats->link_utilization = members.size() > 1 && collective_ns > 0
                                ? (static_cast<double>(bytes) / collective_ns) / (kLatencyFreeBytes / latency_free_ns)
                                : 0.0;
  InstructionTiming timing;
  timing.latency_ns = end - start_ns;
  timing.busy_ns = timing.latency_ns;
  timing.bytes = bytes;
  timing.flops = 0;
  return timing;
}

void RunPartitionId(Machine& machine, const PartitionId& p) {
  Values v = Values::Make(Domain::kU64, 1);
  v.u64[0] = static_cast<uint64_t>(machine.rank);
  Scatter(v, machine.View(p.dst));
}

}  // namespace trn::sim
