#include "profiler_extension.h"

#include <cstring>
#include <new>
#include <string>

#include "c_api_shim.h"
#include "error.h"
#include "profiler_c_api.h"
#include "trace_capture.h"
#include "xspace_encoder.h"

struct PLUGIN_Profiler_Error {
  trn::pjrt::Error error;
};

struct PLUGIN_Profiler {
  trn::pjrt::TraceSession session;
  std::string collected;  // the XSpace handed out by CollectData; lives until Destroy
};

namespace trn::pjrt {
namespace {

// Like the C API shim's Handle, but jaxlib leaves these argument structs' struct_size unset,
// so only the pointer is checked.
template <typename Args, typename Body>
PLUGIN_Profiler_Error* Handle(const char* entry_point, Args* args, Body&& body) noexcept {
  const Status status = Guarded([&]() -> Status {
    if (args == nullptr) return InvalidArgument(std::string(entry_point) + " arguments are NULL");
    return body();
  });
  if (status.ok()) return nullptr;
  return new (std::nothrow) PLUGIN_Profiler_Error{Error(status, entry_point)};
}

Status Session(PLUGIN_Profiler* profiler) {
  return profiler == nullptr ? InvalidArgument("profiler is NULL") : Status::Ok();
}

void ErrorDestroy(PLUGIN_Profiler_Error_Destroy_Args* args) {
  if (args != nullptr) delete args->error;
}

void ErrorMessage(PLUGIN_Profiler_Error_Message_Args* args) {
  if (args == nullptr || args->error == nullptr) return;
  args->message = args->error->error.message().data();
  args->message_size = args->error->error.message().size();
}

PLUGIN_Profiler_Error* ErrorGetCode(PLUGIN_Profiler_Error_GetCode_Args* args) {
  return Handle("PLUGIN_Profiler_Error_GetCode", args, [&] {
    if (args->error == nullptr) return InvalidArgument("error is NULL");
    args->code = static_cast<int>(args->error->error.code());
    return Status::Ok();
  });
}

// The options (a ProfileOptions) do not change what a trn session records: every execution's
// timeline, while it runs.
PLUGIN_Profiler_Error* Create(PLUGIN_Profiler_Create_Args* args) {
  return Handle("PLUGIN_Profiler_Create", args, [&] {
    args->profiler = new PLUGIN_Profiler();
    return Status::Ok();
  });
}

PLUGIN_Profiler_Error* Destroy(PLUGIN_Profiler_Session_Args* args) {
  return Handle("PLUGIN_Profiler_Destroy", args, [&] {
    delete args->profiler;  // stops it if still running
    return Status::Ok();
  });
}

PLUGIN_Profiler_Error* Start(PLUGIN_Profiler_Session_Args* args) {
  return Handle("PLUGIN_Profiler_Start", args, [&] {
    TRN_RETURN_IF_ERROR(Session(args->profiler));
    return args->profiler->session.Start();
  });
}

PLUGIN_Profiler_Error* Stop(PLUGIN_Profiler_Session_Args* args) {
  return Handle("PLUGIN_Profiler_Stop", args, [&] {
    TRN_RETURN_IF_ERROR(Session(args->profiler));
    return args->profiler->session.Stop();
  });
}

// Called with buffer == NULL, it encodes the session's XSpace, reports its size and points
// `buffer` at the plugin's copy (valid until Destroy). Called again with a caller's buffer of
// that size, it copies the bytes there. (jaxlib versions read either.)
PLUGIN_Profiler_Error* CollectData(PLUGIN_Profiler_CollectData_Args* args) {
  return Handle("PLUGIN_Profiler_CollectData", args, [&] {
    TRN_RETURN_IF_ERROR(Session(args->profiler));
    std::string& collected = args->profiler->collected;
    if (args->buffer == nullptr) {
      collected = EncodeXSpace(args->profiler->session.Executions());
      args->buffer = reinterpret_cast<uint8_t*>(collected.data());
    } else if (args->buffer != reinterpret_cast<uint8_t*>(collected.data())) {
      std::memcpy(args->buffer, collected.data(), collected.size());
    }
    args->buffer_size_in_bytes = collected.size();
    return Status::Ok();
  });
}

PLUGIN_Profiler_Api MakeProfilerApi() {
  PLUGIN_Profiler_Api api{};
  api.struct_size = offsetof(PLUGIN_Profiler_Api, collect_data) + sizeof(api.collect_data);
  api.priv = nullptr;
  api.error_destroy = &ErrorDestroy;
  api.error_message = &ErrorMessage;
  api.error_get_code = &ErrorGetCode;
  api.create = &Create;
  api.destroy = &Destroy;
  api.start = &Start;
  api.stop = &Stop;
  api.collect_data = &CollectData;
  return api;
}

}  // namespace

PJRT_Extension_Base* ProfilerExtension() {
  static PLUGIN_Profiler_Api api = MakeProfilerApi();
  static PJRT_Profiler_Extension extension = {
      offsetof(PJRT_Profiler_Extension, traceme_context_id) + sizeof(int64_t),
      PJRT_Extension_Type_Profiler, nullptr, &api, 0};
  return reinterpret_cast<PJRT_Extension_Base*>(&extension);
}

}  // namespace trn::pjrt
