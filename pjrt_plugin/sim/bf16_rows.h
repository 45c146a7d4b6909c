// bf16 <-> fp32 over contiguous rows, the conversions every bf16 tile read and write goes through.
// Integer bit operations only (a widening is a shift, a narrowing is FloatToBf16's round to
// nearest even with NaN made quiet), so the AVX2 and AVX-512 forms give FloatToBf16's and
// Bf16ToFloat's bits exactly; the width follows SimVectorBits().
#pragma once

#include <cstdint>

namespace trn::sim {

// out[i] = Bf16ToFloat(bf16 i of `in`) for i < n; `in` needs no alignment (tiles are bytes).
void WidenBf16Row(const uint8_t* in, int64_t n, float* out);

// bf16 i of `out` = FloatToBf16(in[i]) for i < n; `out` needs no alignment.
void NarrowToBf16Row(const float* in, int64_t n, uint8_t* out);

}  // namespace trn::sim
