// The PJRT profiler extension: how jax.profiler.trace / start_trace reach trn executions. jaxlib
// finds it on PJRT_Api.extension_start when JAX loads the plugin (register_plugin_profiler), and
// every profiler session it starts creates one plugin session through it: started, stopped,
// asked for its data (a serialized XSpace, xspace_encoder.h) and destroyed.
#pragma once

#include "pjrt_c_api.h"

namespace trn::pjrt {

// The head of the extension chain GetPjrtApi publishes (static, lives for the process).
PJRT_Extension_Base* ProfilerExtension();

}  // namespace trn::pjrt
