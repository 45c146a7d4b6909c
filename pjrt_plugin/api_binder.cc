// GetPjrtApi: the one symbol libpjrt_trn.so exports. Fills the PJRT_Api table from the list of
// implemented entry points; every other slot stays NULL, which clients read as "not offered"
// (docs/pjrt-surface.md says why for each). Two extensions: the layouts and the profiler's.
#include "c_api_entry_points.h"
#include "layouts_extension.h"
#include "pjrt_c_api.h"
#include "profiler_extension.h"

namespace trn::pjrt {
namespace {

PJRT_Api MakeApi() {
  PJRT_Api api{};
  api.struct_size = PJRT_Api_STRUCT_SIZE;
  // Layouts (layouts_extension.h), then jax.profiler.trace's (profiler_extension.h).
  api.extension_start = LayoutsExtension(ProfilerExtension());
  api.pjrt_api_version.struct_size = PJRT_Api_Version_STRUCT_SIZE;
  api.pjrt_api_version.extension_start = nullptr;
  api.pjrt_api_version.major_version = PJRT_API_MAJOR;
  api.pjrt_api_version.minor_version = PJRT_API_MINOR;
#define TRN_BIND_HANDLER(name) api.name = &trn::pjrt::name;
  TRN_PJRT_IMPLEMENTED(TRN_BIND_HANDLER)
#undef TRN_BIND_HANDLER
  return api;
}

}  // namespace
}  // namespace trn::pjrt

extern "C" __attribute__((visibility("default"))) const PJRT_Api* GetPjrtApi() {
  static const PJRT_Api api = trn::pjrt::MakeApi();
  return &api;
}
