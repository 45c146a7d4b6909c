// PJRT_Client_Create's create_options (set by jax_trn/plugin.py): which simulated machine to
// build. docs/pjrt-surface.md lists the options; absent ones take the generation's defaults.
#pragma once

#include <cstdint>

#include "pjrt_c_api.h"
#include "sim/chip_topology.h"
#include "sim/status.h"
#include "sim/target_spec.h"

namespace trn::pjrt {

struct ClientOptions {
  const sim::TargetSpec* target = nullptr;
  int chips = 1;
  sim::ChipTopology topology{};      // how the chips are wired (sim/chip_topology.h)
  int lnc = 0;                       // physical cores per device
  int64_t hbm_bytes_per_device = 0;  // capacity of each device's HBM
  // Whether rank-0 f64 arrays may be placed: torch_xla uploads every Python number as one, and
  // its programs convert it before use (hlo_lowering/passes/narrow_float64_scalars.py).
  bool float64_scalars = false;
  // Whether f64 arrays of any rank may be placed (TRN_FLOAT64=float32, jax_trn/config.py): HBM
  // holds their 8-byte values and programs compute them as f32 (narrow-float64).
  bool float64_arrays = false;

  int devices_per_chip() const { return target->physical_cores_per_chip / lnc; }
};

// INVALID_ARGUMENT for an unknown option or target, a wrongly typed value, chips < 1 or beyond
// the largest system of the target (sim::MaxChips), an LNC the target does not support, a
// negative HBM size, or float64_scalars / float64_arrays other than 0 or 1.
StatusOr<ClientOptions> ParseClientOptions(const PJRT_NamedValue* options, size_t num_options);

}  // namespace trn::pjrt
