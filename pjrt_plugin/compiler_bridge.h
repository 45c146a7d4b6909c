// The call from the plugin into the trn compiler, which is Python (hlo_lowering) running in the
// process that loaded the plugin.
#pragma once

#include <string>
#include <string_view>

#include "sim/status.h"

namespace trn::pjrt {

// hlo_lowering.driver.compile_for_pjrt(code, fmt, compile_options, target) -> program bytes.
// Compile errors keep the compiler's code and message; anything else is INTERNAL with the
// exception type and the end of its traceback.
StatusOr<std::string> CompileInPython(std::string_view code, std::string_view format,
                                      std::string_view compile_options, std::string_view target);

}  // namespace trn::pjrt
