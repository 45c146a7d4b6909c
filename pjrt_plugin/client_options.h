// PJRT_Client_Create's create_options (set by jax_trn/plugin.py): which simulated machine to
// build. docs/pjrt-surface.md lists the options; absent ones take the generation's defaults.
#pragma once

#include <cstdint>

#include "pjrt_c_api.h"
#include "sim/status.h"
#include "sim/target_spec.h"

namespace trn::pjrt {

struct ClientOptions {
  const sim::TargetSpec* target = nullptr;
  int chips = 1;
  int lnc = 0;                       // physical cores per device
  int64_t hbm_bytes_per_device = 0;  // capacity of each device's HBM

  int devices_per_chip() const { return target->physical_cores_per_chip / lnc; }
};

// INVALID_ARGUMENT for an unknown option or target, a wrongly typed value, chips < 1, an LNC the
// target does not support, or a negative HBM size.
StatusOr<ClientOptions> ParseClientOptions(const PJRT_NamedValue* options, size_t num_options);

}  // namespace trn::pjrt
