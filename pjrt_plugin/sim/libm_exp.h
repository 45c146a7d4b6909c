// e^x for fp32 rows, with the bits of the host libm's expf (std::exp of a float) but computed
// 4, 8 or 16 lanes at a time (SSE2, AVX2, AVX-512). Each lane evaluates e^x in double to within
// 2^-42 relative, far inside an fp32 ulp, and rounds it once to fp32. A libm whose expf errs by
// at most 0.502 ulp (glibc's documented bound, for its SSE2 and FMA forms alike) must return that
// same float wherever e^x lies more than 0.002 ulp from the midpoint between two floats: the
// other neighbour is more than 0.502 ulp away. Lanes whose double lies within 2^-7 ulp of a
// midpoint, lanes with subnormal results, and NaNs call std::exp instead, so every lane has
// libm's bits (checked against every fp32 input at each width, docs/numerics.md).
#pragma once

#include <cstdint>

namespace trn::sim {

// out[i] = std::exp(in[i]) for i < n; out may be in.
void LibmExpRow(const float* in, int64_t n, float* out);

}  // namespace trn::sim
