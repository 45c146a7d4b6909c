// The call from the plugin into the trn compiler, which is Python (hlo_lowering, behind the
// plugin's compile service jax_trn.compilation) running in the process that loaded the plugin.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "client_options.h"
#include "compile_options.h"
#include "sim/status.h"
#include "sim/target_spec.h"

namespace trn::pjrt {

// jax_trn.compilation.compile_for_pjrt(code, fmt, options, target) -> program bytes, where
// `options` is {"num_replicas": n, "num_partitions": n} as ParseCompileOptions read them and
// `target` the target description of the client's devices ({figure name: value},
// sim::TargetFigures, with their LNC, and "float64": "float32" where the client computes float64
// as float32).
// Compile errors keep the compiler's code and message; anything else is INTERNAL with the
// exception type and the end of its traceback.
StatusOr<std::string> CompileInPython(std::string_view code, std::string_view format,
                                      const CompileOptions& options,
                                      const ClientOptions& client);

// jax_trn.compilation.cost_analysis_for_pjrt(source) -> {property: value}: the static cost of the
// StableHLO program `source` (hlo_lowering/cost_analysis.py), errors as CompileInPython's.
StatusOr<std::vector<std::pair<std::string, double>>> CostAnalysisInPython(
    std::string_view source);

}  // namespace trn::pjrt
