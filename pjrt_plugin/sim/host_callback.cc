#include "host_callback.h"

#include <vector>

namespace trn::sim {
namespace {

// A dense row-major view of `bytes` with the shape and dtype of `like`.
StridedView DenseLike(const StridedView& like, uint8_t* bytes) {
  StridedView dense = like;
  dense.base = bytes;
  int64_t stride = DTypeSize(like.dtype);
  for (int d = like.rank - 1; d >= 0; --d) {
    dense.stride_bytes[d] = stride;
    stride *= like.count[d];
  }
  return dense;
}

int64_t ByteSize(const StridedView& view) { return view.num_elements() * DTypeSize(view.dtype); }

}  // namespace

Status RunHostCallback(Machine& machine, const HostCallback& h, const HostCallbackHandler& handler,
                       const std::string& what) {
  if (!handler) {
    return FailedPrecondition(what + " calls the host, and this execution has no host-callback "
                              "handler (host callbacks run only in the process that compiled the program, through the PJRT plugin)");
  }
  std::vector<std::vector<uint8_t>> operands(h.srcs.size()), results(h.dsts.size());
  HostCallbackCall call{h.callback, machine.rank, {}, {}};
  for (size_t i = 0; i < h.srcs.size(); ++i) {
    const StridedView src = machine.View(h.srcs[i]);
    operands[i].resize(ByteSize(src));
    if (!operands[i].empty()) CopyBits(DenseLike(src, operands[i].data()), src);
    call.operands.emplace_back(operands[i].data(), static_cast<int64_t>(operands[i].size()));
  }
  std::vector<StridedView> dsts;
  for (size_t i = 0; i < h.dsts.size(); ++i) {
    dsts.push_back(machine.View(h.dsts[i]));
    results[i].resize(ByteSize(dsts.back()));
    call.results.emplace_back(results[i].data(), static_cast<int64_t>(results[i].size()));
  }
  const Status status = handler(call);
  if (!status.ok()) return Status(status.code(), what + ": " + status.message());
  for (size_t i = 0; i < dsts.size(); ++i) {
    if (!results[i].empty()) CopyBits(dsts[i], DenseLike(dsts[i], results[i].data()));
  }
  return Status::Ok();
}

}  // namespace trn::sim
