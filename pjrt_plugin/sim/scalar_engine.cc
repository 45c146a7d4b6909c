// ScalarE: dst = func(src * scale + bias), computed in fp32 whatever the tile dtypes.
#include "elementwise.h"
#include "engines.h"

namespace trn::sim {

void RunActivation(Machine& machine, const Activation& a) {
  Values x = Gather(machine.View(a.src), Domain::kF32);
  const Values bias = a.bias.is_tile
                          ? RepeatEach(Gather(machine.View(a.bias.tile), Domain::kF32), a.src.free_size())
                          : ScalarValues(a.bias.immediate, Domain::kF32, 1);
  float* v = x.f32.data();
  const size_t n = x.size();
  const float scale = a.scale;
  if (a.bias.is_tile) {
    const float* b = bias.f32.data();
    for (size_t i = 0; i < n; ++i) v[i] = v[i] * scale + b[i];
  } else {
    const float b = bias.f32[0];
    for (size_t i = 0; i < n; ++i) v[i] = v[i] * scale + b;
  }
  ApplyUnary(a.func, DType::kF32, x);
  Scatter(x, machine.View(a.dst));
}

}  // namespace trn::sim
