// PJRT_DeviceDescription: what a NeuronCore is (id, kind, position on its chip), independent of
// whether it is addressable. Every attribute becomes a Python attribute of the JAX device.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "pjrt_c_api.h"
#include "sim/target_spec.h"

struct PJRT_DeviceDescription {};

namespace trn::pjrt {

class DeviceDescription : public PJRT_DeviceDescription {
 public:
  // `core_on_chip` counts logical cores (LNC-sized groups of physical cores) on `chip`.
  // `chip_coords`: the chip's (x, y, z) in the torus of its system (sim/chip_topology.h).
  DeviceDescription(int id, int chip, std::array<int, 3> chip_coords, int core_on_chip,
                    const sim::TargetSpec& target, int lnc);
  DeviceDescription(const DeviceDescription&) = delete;
  DeviceDescription& operator=(const DeviceDescription&) = delete;

  int id() const { return id_; }
  int process_index() const { return 0; }
  int chip() const { return static_cast<int>(chip_index_); }
  const std::string& kind() const { return kind_; }
  const std::string& name() const { return name_; }  // "TRN_0"
  const std::string& to_string() const { return to_string_; }
  const std::vector<PJRT_NamedValue>& attributes() const { return attributes_; }

 private:
  int id_;
  std::string kind_, name_, to_string_;
  std::vector<int64_t> coords_;  // the chip's [x, y, z]; pointed to by attributes_
  int64_t core_on_chip_, chip_index_, lnc_;
  std::string target_;
  std::vector<PJRT_NamedValue> attributes_;  // point into the members above
};

}  // namespace trn::pjrt
