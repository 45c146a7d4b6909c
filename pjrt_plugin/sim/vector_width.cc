#include "vector_width.h"

#include <cstdlib>

namespace trn::sim {
namespace {

int HostVectorBits() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return 512;
  if (__builtin_cpu_supports("avx2")) return 256;
#endif
  return 128;
}

int VectorBitsFromEnvironment() {
  int bits = HostVectorBits();
  if (const char* env = std::getenv("TRN_SIM_VECTOR_BITS"); env != nullptr && *env != '\0') {
    const int cap = std::atoi(env);
    while (bits > 128 && bits > cap) bits /= 2;
  }
  return bits;
}

}  // namespace

int SimVectorBits() {
  static const int bits = VectorBitsFromEnvironment();
  return bits;
}

}  // namespace trn::sim
