// ScalarE: dst = func(src * scale + bias), computed in fp32 whatever the tile dtypes; an
// immediate bias of zero is no addition (signed zeros pass through).
#include "elementwise.h"
#include "engines.h"

namespace trn::sim {

void RunActivation(Machine& machine, const Activation& a) {
  const StridedView src = machine.View(a.src), dst = machine.View(a.dst);
  const int64_t total = dst.num_elements();
  // The bias is read whole before anything is written, so only src decides the chunking.
  const Values bias = a.bias.is_tile ? Gather(machine.View(a.bias.tile), Domain::kF32)
                                     : ScalarValues(a.bias.immediate, Domain::kF32, 1);
  const int64_t row_length = a.bias.is_tile ? a.src.free_size() : total;
  const float scale = a.scale;
  ForEachChunk(total, CanChunk(dst, {src}), [&](int64_t first, int64_t n) {
    Values x = Values::Uninitialized(Domain::kF32, n);
    GatherRange(src, first, x);
    float* v = x.f32.data();
    if (a.bias.is_tile) {
      const Values b = RepeatEach(bias, row_length, first, n);
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] * scale + b.f32[i];
    } else if (bias.f32[0] != 0.0f) {
      const float b = bias.f32[0];
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] * scale + b;
    } else {
      // A zero bias adds nothing: x + 0 would turn -0 into +0 (sqrt(-0) must stay -0).
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] * scale;
    }
    ApplyUnary(a.func, DType::kF32, x);
    ScatterRange(x, dst, first);
  });
}

}  // namespace trn::sim
