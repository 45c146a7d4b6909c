#include "device_description.h"

namespace trn::pjrt {
namespace {

PJRT_NamedValue NamedInt(const char* name, const int64_t* value) {
  PJRT_NamedValue v{};
  v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
  v.name = name;
  v.name_size = std::char_traits<char>::length(name);
  v.type = PJRT_NamedValue_kInt64;
  v.int64_value = *value;
  v.value_size = 1;
  return v;
}

}  // namespace

DeviceDescription::DeviceDescription(int id, int chip, std::array<int, 3> chip_coords,
                                     int core_on_chip, const sim::TargetSpec& target, int lnc)
    : id_(id),
      coords_(chip_coords.begin(), chip_coords.end()),
      core_on_chip_(core_on_chip),
      chip_index_(chip),
      lnc_(lnc),
      target_(target.name) {
  kind_ = std::string(target.core_version) + " (" + target.name + ", LNC=" +
          std::to_string(lnc) + ", simulated)";
  name_ = "TRN_" + std::to_string(id);
  to_string_ = "TrnDevice(id=" + std::to_string(id) + ", chip=" + std::to_string(chip) +
               ", core_on_chip=" + std::to_string(core_on_chip) + ", kind=" + kind_ + ")";

  PJRT_NamedValue coords{};
  coords.struct_size = PJRT_NamedValue_STRUCT_SIZE;
  coords.name = "coords";
  coords.name_size = 6;
  coords.type = PJRT_NamedValue_kInt64List;
  coords.int64_array_value = coords_.data();
  coords.value_size = coords_.size();
  attributes_.push_back(coords);
  attributes_.push_back(NamedInt("core_on_chip", &core_on_chip_));
  attributes_.push_back(NamedInt("chip_index", &chip_index_));
  attributes_.push_back(NamedInt("lnc", &lnc_));
  PJRT_NamedValue target_value{};
  target_value.struct_size = PJRT_NamedValue_STRUCT_SIZE;
  target_value.name = "target";
  target_value.name_size = 6;
  target_value.type = PJRT_NamedValue_kString;
  target_value.string_value = target_.c_str();
  target_value.value_size = target_.size();
  attributes_.push_back(target_value);
}

}  // namespace trn::pjrt
