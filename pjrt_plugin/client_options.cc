#include "client_options.h"

#include <algorithm>
#include <string>
#include <string_view>

namespace trn::pjrt {
namespace {

std::string_view Name(const PJRT_NamedValue& v) { return std::string_view(v.name, v.name_size); }

StatusOr<int64_t> IntValue(const PJRT_NamedValue& v) {
  if (v.type != PJRT_NamedValue_kInt64) {
    return InvalidArgument("trn create option '" + std::string(Name(v)) +
                           "' must be an integer");
  }
  return v.int64_value;
}

// trn2 pairs physical cores into logical ones (LNC=2 by default, LNC=1 possible); trn1 and
// trn3 expose each physical core as a device (shared/design/neuroncore.md).
bool SupportsLnc(const sim::TargetSpec& target, int64_t lnc) {
  if (std::string_view(target.name) == "trn2") return lnc == 1 || lnc == 2;
  return lnc == 1;
}

std::string SupportedLncs(const sim::TargetSpec& target) {
  return std::string_view(target.name) == "trn2" ? "1 or 2" : "1";
}

}  // namespace

StatusOr<ClientOptions> ParseClientOptions(const PJRT_NamedValue* options, size_t num_options) {
  std::string target_name = "trn2";
  int64_t chips = 1, lnc = 0, hbm_bytes = 0, float64_scalars = 0, float64_arrays = 0;
  for (size_t i = 0; i < num_options; ++i) {
    const PJRT_NamedValue& v = options[i];
    const std::string_view name = Name(v);
    if (name == "target") {
      if (v.type != PJRT_NamedValue_kString) {
        return InvalidArgument("trn create option 'target' must be a string");
      }
      target_name.assign(v.string_value, v.value_size);
    } else if (name == "chips" || name == "lnc" || name == "hbm_bytes" ||
               name == "float64_scalars" || name == "float64_arrays") {
      StatusOr<int64_t> value = IntValue(v);
      if (!value.ok()) return value.status();
      (name == "chips"             ? chips
       : name == "lnc"             ? lnc
       : name == "hbm_bytes"       ? hbm_bytes
       : name == "float64_scalars" ? float64_scalars
                                   : float64_arrays) = *value;
    } else {
      return InvalidArgument("unknown trn create option '" + std::string(name) +
                             "'; known: target, chips, lnc, hbm_bytes, float64_scalars, "
                             "float64_arrays");
    }
  }

  ClientOptions result;
  result.target = sim::FindTarget(target_name);
  if (result.target == nullptr) {
    return InvalidArgument("unknown trn target '" + target_name + "'; known: " + sim::KnownTargets());
  }
  StatusOr<sim::ChipTopology> topology =
      sim::TopologyOf(*result.target, static_cast<int>(std::clamp<int64_t>(chips, 0, 1 << 20)));
  if (!topology.ok()) return topology.status();
  result.topology = *topology;
  if (lnc == 0) lnc = result.target->default_lnc;
  if (!SupportsLnc(*result.target, lnc)) {
    return InvalidArgument("LNC=" + std::to_string(lnc) + " is not supported on " + target_name +
                           "; use " + SupportedLncs(*result.target));
  }
  if (hbm_bytes < 0) {
    return InvalidArgument("trn hbm_bytes must not be negative, got " + std::to_string(hbm_bytes));
  }
  for (const auto& [flag, value] : {std::pair<const char*, int64_t>{"float64_scalars", float64_scalars},
                                     {"float64_arrays", float64_arrays}}) {
    if (value != 0 && value != 1) {
      return InvalidArgument(std::string("trn ") + flag + " must be 0 or 1, got " +
                             std::to_string(value));
    }
  }
  result.float64_scalars = float64_scalars == 1;
  result.float64_arrays = float64_arrays == 1;
  result.chips = static_cast<int>(chips);
  result.lnc = static_cast<int>(lnc);
  result.hbm_bytes_per_device =
      hbm_bytes > 0 ? hbm_bytes : result.target->hbm_bytes_per_chip / result.devices_per_chip();
  return result;
}

}  // namespace trn::pjrt
