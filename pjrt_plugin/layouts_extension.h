// The PJRT layouts extension: the memory layouts of buffers, of the client's defaults and of an
// executable's outputs, answered from what the plugin holds instead of from
// the HLO module jaxlib would otherwise convert from the executable's StableHLO text (the largest
// part of a cached compile, docs/developing.md). Every trn device buffer is dense row-major, so
// every layout is the descending one, "{rank-1,...,1,0}" in xla::Layout's text form.
#pragma once

#include <cstddef>
#include <string>

#include "layouts_c_api.h"
#include "pjrt_c_api.h"

struct PJRT_Layouts_MemoryLayout {
  std::string text;  // xla::Layout's text form, what Serialize hands out
};

namespace trn::pjrt {

// The dense row-major layout of an array of `rank` dimensions: "{}", "{0}", "{1,0}", ...
PJRT_Layouts_MemoryLayout RowMajorLayout(size_t rank);

// The extension, followed on the chain by `next` (static, lives for the process).
PJRT_Extension_Base* LayoutsExtension(PJRT_Extension_Base* next);

}  // namespace trn::pjrt
