// The C interface of the PJRT layouts extension: memory layouts of buffers, of a client's or a
// topology's defaults, and of an executable's outputs and parameters, handed out as opaque
// layouts that serialize to xla::Layout's text form. The build requirement's pjrt_c_api.h does
// not declare it, so it is declared here with the layout of XLA's public definition
// (xla/pjrt/c/pjrt_c_api_layouts_extension.h, PJRT_API_LAYOUTS_EXTENSION_VERSION 4; the table
// only ever grew at its end, so older readers see the prefix they know).
#pragma once

#include <cstddef>
#include <cstdint>

#include "pjrt_c_api.h"

extern "C" {

typedef struct PJRT_Layouts_MemoryLayout PJRT_Layouts_MemoryLayout;          // the plugin's
typedef struct PJRT_Layouts_SerializedLayout PJRT_Layouts_SerializedLayout;  // the plugin's

struct PJRT_Layouts_MemoryLayout_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Layouts_MemoryLayout* layout;
};
PJRT_DEFINE_STRUCT_TRAITS(PJRT_Layouts_MemoryLayout_Destroy_Args, layout);

struct PJRT_Layouts_MemoryLayout_Serialize_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Layouts_MemoryLayout* layout;
  const char* serialized_bytes;                      // out; lives as long as serialized_layout
  size_t serialized_bytes_size;                      // out
  PJRT_Layouts_SerializedLayout* serialized_layout;  // out; backs serialized_bytes
  void (*serialized_layout_deleter)(PJRT_Layouts_SerializedLayout* s_layout);  // out
};
PJRT_DEFINE_STRUCT_TRAITS(PJRT_Layouts_MemoryLayout_Serialize_Args, serialized_layout_deleter);

struct PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  PJRT_Layouts_MemoryLayout* layout;  // out; the caller destroys it
};
PJRT_DEFINE_STRUCT_TRAITS(PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args, layout);

struct PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  PJRT_Buffer_Type type;
  const int64_t* dims;
  size_t num_dims;
  PJRT_Layouts_MemoryLayout* layout;  // out; the caller destroys it
};
PJRT_DEFINE_STRUCT_TRAITS(PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args, layout);

// The layouts are the executable's.
struct PJRT_Layouts_PJRT_Executable_GetOutputLayouts_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  size_t num_outputs;                  // out
  PJRT_Layouts_MemoryLayout** layouts;  // out; owned by the executable
};
PJRT_DEFINE_STRUCT_TRAITS(PJRT_Layouts_PJRT_Executable_GetOutputLayouts_Args, layouts);

typedef PJRT_Error* PJRT_Layouts_MemoryLayout_Destroy(PJRT_Layouts_MemoryLayout_Destroy_Args*);
typedef PJRT_Error* PJRT_Layouts_MemoryLayout_Serialize(
    PJRT_Layouts_MemoryLayout_Serialize_Args*);
typedef PJRT_Error* PJRT_Layouts_PJRT_Buffer_MemoryLayout(
    PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args*);
typedef PJRT_Error* PJRT_Layouts_PJRT_Client_GetDefaultLayout(
    PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args*);
typedef PJRT_Error* PJRT_Layouts_PJRT_Executable_GetOutputLayouts(
    PJRT_Layouts_PJRT_Executable_GetOutputLayouts_Args*);

// On the PJRT_Api's extension chain (type PJRT_Extension_Type_Layouts).
typedef struct PJRT_Layouts_Extension {
  PJRT_Extension_Base base;
  PJRT_Layouts_MemoryLayout_Destroy* PJRT_Layouts_MemoryLayout_Destroy;
  PJRT_Layouts_MemoryLayout_Serialize* PJRT_Layouts_MemoryLayout_Serialize;
  PJRT_Layouts_PJRT_Client_GetDefaultLayout* PJRT_Layouts_PJRT_Client_GetDefaultLayout;
  PJRT_Layouts_PJRT_Buffer_MemoryLayout* PJRT_Layouts_PJRT_Buffer_MemoryLayout;
  // A topology's default layout: NULL here, since the plugin has no topology
  // (PJRT_Client_TopologyDescription is UNIMPLEMENTED); jaxlib then reports it unimplemented.
  void* PJRT_Layouts_PJRT_Topology_GetDefaultLayout;
  PJRT_Layouts_PJRT_Executable_GetOutputLayouts* PJRT_Layouts_PJRT_Executable_GetOutputLayouts;
  // Version 4's parameter query; jaxlib calls it only from PJRT C API 0.92, and this plugin's
  // header is 0.81, so it stays NULL (jaxlib then reads the parameters' layouts from the HLO).
  void* PJRT_Layouts_PJRT_Executable_GetParameterLayouts;
} PJRT_Layouts_Extension;

}  // extern "C"
