// DMA queues: paired element copies between HBM and SBUF (and SBUF-SBUF, HBM-HBM), converting
// dtypes through the source's compute domain as the hardware casts through fp32.
#include "engines.h"

namespace trn::sim {
namespace {

StridedView EndpointView(Machine& machine, const Endpoint& e) {
  return e.is_tile ? machine.View(e.tile) : machine.View(e.hbm);
}

}  // namespace

void RunDmaCopy(Machine& machine, const DmaCopy& dma) {
  const StridedView src = EndpointView(machine, dma.src);
  Scatter(Gather(src, ComputeDomain(src.dtype)), EndpointView(machine, dma.dst));
}

}  // namespace trn::sim
