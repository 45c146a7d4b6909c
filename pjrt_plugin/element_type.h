// Which PJRT element types a NeuronCore holds, and the arithmetic of array sizes. The program
// format's dtype codes are PJRT_Buffer_Type's (docs/program-format.md), so mapping is a check.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pjrt_c_api.h"
#include "sim/dtype.h"
#include "sim/status.h"

namespace trn::pjrt {

// "f32", "bf16", ... ; "type<N>" for a code this plugin does not name.
std::string ElementTypeName(PJRT_Buffer_Type type);

// "f32[2,3]"
std::string ShapeString(PJRT_Buffer_Type type, const std::vector<int64_t>& dims);

// The device dtype for `type`, or INVALID_ARGUMENT naming the type, `what` is being placed
// ("a f64[4] array on TRN_0") and what to do instead.
StatusOr<sim::DType> DeviceDType(PJRT_Buffer_Type type, const std::string& what);

// Bytes per element of a device dtype (the program format's sizes for PJRT's types).
int64_t ElementSize(sim::DType dtype);

// Dense row-major size of `dims` elements of `dtype`; INVALID_ARGUMENT for a negative
// dimension or a size that overflows int64.
StatusOr<int64_t> DenseByteSize(sim::DType dtype, const std::vector<int64_t>& dims);

}  // namespace trn::pjrt
