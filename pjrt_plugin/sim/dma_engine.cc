// DMA queues: paired element copies between HBM and SBUF (and SBUF-SBUF, HBM-HBM), converting
// dtypes through the source's compute domain as the hardware casts through fp32, and moving the
// bits unchanged between equal dtypes.
#include "elementwise.h"
#include "engines.h"

namespace trn::sim {
namespace {

StridedView EndpointView(Machine& machine, const Endpoint& e) {
  return e.is_tile ? machine.View(e.tile) : machine.View(e.hbm);
}

}  // namespace

void RunDmaCopy(Machine& machine, const DmaCopy& dma) {
  RunCopy(EndpointView(machine, dma.dst), EndpointView(machine, dma.src));
}

}  // namespace trn::sim
