// PJRT_Error: a status handed across the C API. Carries the code, the message and the entry
// point that failed, so a user reading a JAX exception knows which stage of the plugin refused.
#pragma once

#include <string>
#include <string_view>

#include "pjrt_c_api.h"
#include "sim/status.h"

// Clients built against PJRT headers >= ~0.105 read a leading vtable pointer from PJRT_Error
// (shared/design/pjrt-contract.md); it must exist and be NULL.
struct PJRT_Error {
  void* vtable = nullptr;
};

namespace trn::pjrt {

class Error : public PJRT_Error {
 public:
  // `stage` is the entry point that failed ("PJRT_Client_Compile").
  Error(const Status& status, std::string_view stage);

  PJRT_Error_Code code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  PJRT_Error_Code code_;
  std::string message_;
};

// nullptr for an ok status; otherwise a new Error the caller (the PJRT client) owns.
PJRT_Error* ToPjrtError(const Status& status, std::string_view stage);

}  // namespace trn::pjrt
