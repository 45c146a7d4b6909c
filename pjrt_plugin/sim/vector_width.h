// The widest host vector the simulator's kernels use (matmul panels, bf16 conversions), chosen at
// run time so one build runs on every x86-64 host.
#pragma once

namespace trn::sim {

// 512 (AVX-512), 256 (AVX2) or 128 (SSE2, and every non-x86 host), capped by
// TRN_SIM_VECTOR_BITS when set (tests run each width to show they agree bit for bit).
int SimVectorBits();

}  // namespace trn::sim
