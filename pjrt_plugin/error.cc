#include "error.h"

namespace trn::pjrt {

Error::Error(const Status& status, std::string_view stage)
    : code_(static_cast<PJRT_Error_Code>(status.code())),
      message_(status.message() + " [trn plugin, " + std::string(stage) + "]") {}

PJRT_Error* ToPjrtError(const Status& status, std::string_view stage) {
  if (status.ok()) return nullptr;
  return new Error(status, stage);
}

}  // namespace trn::pjrt
