// The C interface through which jaxlib's profiler (jax.profiler.trace) reaches a PJRT plugin:
// the PJRT profiler extension, found on PJRT_Api.extension_start by its type, points at a table
// of session callbacks (create / start / stop / collect data / destroy, and three to read the
// errors they return). The build requirement's pjrt_c_api.h does not declare them, so they are
// declared here with the layout of XLA's public definitions (xla/backends/profiler/plugin/
// profiler_c_api.h, PLUGIN_PROFILER_VERSION 1, and xla/pjrt/c/pjrt_c_api_profiler_extension.h,
// PJRT_API_PROFILER_EXTENSION_VERSION 1). jaxlib refuses a table whose struct_size is not its own.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pjrt_c_api.h"

extern "C" {

typedef struct PLUGIN_Profiler PLUGIN_Profiler;              // one session (the plugin's)
typedef struct PLUGIN_Profiler_Error PLUGIN_Profiler_Error;  // the plugin's; caller destroys

typedef struct PLUGIN_Profiler_Error_Destroy_Args {
  size_t struct_size;
  void* priv;
  PLUGIN_Profiler_Error* error;
} PLUGIN_Profiler_Error_Destroy_Args;

typedef struct PLUGIN_Profiler_Error_Message_Args {
  size_t struct_size;
  void* priv;
  const PLUGIN_Profiler_Error* error;
  const char* message;  // out; lives as long as `error`
  size_t message_size;  // out
} PLUGIN_Profiler_Error_Message_Args;

typedef struct PLUGIN_Profiler_Error_GetCode_Args {
  size_t struct_size;
  void* priv;
  const PLUGIN_Profiler_Error* error;
  int code;  // out: an absl::StatusCode (the PJRT_Error_Code numbers)
} PLUGIN_Profiler_Error_GetCode_Args;

typedef struct PLUGIN_Profiler_Create_Args {
  size_t struct_size;
  const char* options;  // a serialized tensorflow.ProfileOptions
  size_t options_size;
  PLUGIN_Profiler* profiler;  // out
} PLUGIN_Profiler_Create_Args;

// Destroy, Start and Stop take only the session.
typedef struct PLUGIN_Profiler_Session_Args {
  size_t struct_size;
  PLUGIN_Profiler* profiler;
} PLUGIN_Profiler_Session_Args;

typedef struct PLUGIN_Profiler_CollectData_Args {
  size_t struct_size;
  PLUGIN_Profiler* profiler;
  uint8_t* buffer;              // in/out: a serialized tensorflow.profiler.XSpace
  size_t buffer_size_in_bytes;  // out
} PLUGIN_Profiler_CollectData_Args;

typedef struct PLUGIN_Profiler_Api {
  size_t struct_size;  // must be offsetof(collect_data) + sizeof(collect_data)
  void* priv;
  void (*error_destroy)(PLUGIN_Profiler_Error_Destroy_Args* args);
  void (*error_message)(PLUGIN_Profiler_Error_Message_Args* args);
  PLUGIN_Profiler_Error* (*error_get_code)(PLUGIN_Profiler_Error_GetCode_Args* args);
  PLUGIN_Profiler_Error* (*create)(PLUGIN_Profiler_Create_Args* args);
  PLUGIN_Profiler_Error* (*destroy)(PLUGIN_Profiler_Session_Args* args);
  PLUGIN_Profiler_Error* (*start)(PLUGIN_Profiler_Session_Args* args);
  PLUGIN_Profiler_Error* (*stop)(PLUGIN_Profiler_Session_Args* args);
  PLUGIN_Profiler_Error* (*collect_data)(PLUGIN_Profiler_CollectData_Args* args);
} PLUGIN_Profiler_Api;

// On the PJRT_Api's extension chain (type PJRT_Extension_Type_Profiler).
typedef struct PJRT_Profiler_Extension {
  size_t struct_size;  // through traceme_context_id
  PJRT_Extension_Type type;
  PJRT_Extension_Base* next;
  PLUGIN_Profiler_Api* profiler_api;
  int64_t traceme_context_id;  // only for the extension's use on execute arguments
} PJRT_Profiler_Extension;

}  // extern "C"
