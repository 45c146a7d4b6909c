// The elementwise building blocks VectorE, ScalarE and GpSimd share: apply an ALU op to paired
// source views in the op's compute domain, materialise immediates, broadcast per-row scalars.
#pragma once

#include <vector>

#include "alu.h"
#include "program.h"
#include "strided_view.h"

namespace trn::sim {

// op(srcs...) element by element. The compute domain is that of the data operand (select's
// on_true, clamp's x, otherwise the first); select's predicate is read in its own domain.
Values ComputeElementwise(AluOp op, const std::vector<StridedView>& srcs);

// `n` copies of an immediate, first rounded to its own dtype, then converted to `domain`.
Values ScalarValues(const Scalar& scalar, Domain domain, size_t n);

// Each of `per_row`'s values repeated `row_length` times.
Values RepeatEach(const Values& per_row, size_t row_length);

}  // namespace trn::sim
