// C-API handlers for errors, the plugin itself and the client.
#include <cstring>
#include <string_view>

#include "c_api_entry_points.h"
#include "c_api_shim.h"
#include "client.h"
#include "event.h"

namespace trn::pjrt {
namespace {

// Attributes of the plugin (PJRT_Plugin_Attributes). JAX serializes StableHLO at
// stablehlo_current_version (jaxlib 0.10.2's own current version, 1.17.0), and the compiler
// accepts every version back to jaxlib's minimum (0.9.0). xla_version 2 is what XLA's own
// plugins report for this C API generation.
constexpr int64_t kStableHloCurrent[] = {1, 17, 0};
constexpr int64_t kStableHloMinimum[] = {0, 9, 0};

PJRT_NamedValue Int64List(const char* name, const int64_t* values, size_t size) {
  PJRT_NamedValue v{};
  v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
  v.name = name;
  v.name_size = std::strlen(name);
  v.type = PJRT_NamedValue_kInt64List;
  v.int64_array_value = values;
  v.value_size = size;
  return v;
}

PJRT_NamedValue Int64(const char* name, int64_t value) {
  PJRT_NamedValue v{};
  v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
  v.name = name;
  v.name_size = std::strlen(name);
  v.type = PJRT_NamedValue_kInt64;
  v.int64_value = value;
  v.value_size = 1;
  return v;
}

const PJRT_NamedValue kPluginAttributes[] = {
    Int64("xla_version", 2),
    Int64List("stablehlo_current_version", kStableHloCurrent, 3),
    Int64List("stablehlo_minimum_version", kStableHloMinimum, 3),
};

std::string_view Bytes(const char* data, size_t size) {
  return data == nullptr ? std::string_view() : std::string_view(data, size);
}

}  // namespace

void PJRT_Error_Destroy(PJRT_Error_Destroy_Args* args) {
  if (args == nullptr) return;
  delete static_cast<Error*>(args->error);
}

void PJRT_Error_Message(PJRT_Error_Message_Args* args) {
  if (args == nullptr || args->error == nullptr) return;
  const Error* error = static_cast<const Error*>(args->error);
  args->message = error->message().data();
  args->message_size = error->message().size();
}

PJRT_Error* PJRT_Error_GetCode(PJRT_Error_GetCode_Args* args) {
  return TRN_HANDLE(PJRT_Error_GetCode, code) {
    TRN_UNWRAP(const Error, error, args->error);
    args->code = error->code();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Plugin_Initialize(PJRT_Plugin_Initialize_Args* args) {
  return TRN_HANDLE(PJRT_Plugin_Initialize, extension_start) { return Status::Ok(); });
}

PJRT_Error* PJRT_Plugin_Attributes(PJRT_Plugin_Attributes_Args* args) {
  return TRN_HANDLE(PJRT_Plugin_Attributes, num_attributes) {
    args->attributes = kPluginAttributes;
    args->num_attributes = std::size(kPluginAttributes);
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Client_Create(PJRT_Client_Create_Args* args) {
  // The key-value callbacks are never touched: they may be uninitialised under torch_xla.
  return TRN_HANDLE(PJRT_Client_Create, client) {
    if (args->num_options > 0 && args->create_options == nullptr) {
      return InvalidArgument("create_options is NULL");
    }
    TRN_ASSIGN_OR_RETURN(options, ParseClientOptions(args->create_options, args->num_options));
    args->client = new Client(options);
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Client_Destroy(PJRT_Client_Destroy_Args* args) {
  return TRN_HANDLE(PJRT_Client_Destroy, client) {
    delete static_cast<Client*>(args->client);
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Client_PlatformName(PJRT_Client_PlatformName_Args* args) {
  return TRN_HANDLE(PJRT_Client_PlatformName, platform_name_size) {
    TRN_UNWRAP(Client, client, args->client);
    args->platform_name = client->platform_name().data();
    args->platform_name_size = client->platform_name().size();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Client_ProcessIndex(PJRT_Client_ProcessIndex_Args* args) {
  return TRN_HANDLE(PJRT_Client_ProcessIndex, process_index) {
    args->process_index = 0;
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Client_PlatformVersion(PJRT_Client_PlatformVersion_Args* args) {
  return TRN_HANDLE(PJRT_Client_PlatformVersion, platform_version_size) {
    TRN_UNWRAP(Client, client, args->client);
    args->platform_version = client->platform_version().data();
    args->platform_version_size = client->platform_version().size();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Client_Devices(PJRT_Client_Devices_Args* args) {
  return TRN_HANDLE(PJRT_Client_Devices, num_devices) {
    TRN_UNWRAP(Client, client, args->client);
    args->devices = client->devices().data();
    args->num_devices = client->devices().size();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Client_AddressableDevices(PJRT_Client_AddressableDevices_Args* args) {
  return TRN_HANDLE(PJRT_Client_AddressableDevices, num_addressable_devices) {
    TRN_UNWRAP(Client, client, args->client);
    args->addressable_devices = client->devices().data();
    args->num_addressable_devices = client->devices().size();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Client_LookupDevice(PJRT_Client_LookupDevice_Args* args) {
  return TRN_HANDLE(PJRT_Client_LookupDevice, device) {
    TRN_UNWRAP(Client, client, args->client);
    TRN_ASSIGN_OR_RETURN(device, client->LookupDevice(args->id));
    args->device = device;
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Client_LookupAddressableDevice(PJRT_Client_LookupAddressableDevice_Args* args) {
  return TRN_HANDLE(PJRT_Client_LookupAddressableDevice, addressable_device) {
    TRN_UNWRAP(Client, client, args->client);
    TRN_ASSIGN_OR_RETURN(device, client->LookupDevice(args->local_hardware_id));
    args->addressable_device = device;
    return Status::Ok();
  });
}

// jaxlib 0.10.2 calls this slot unconditionally while creating its client (a NULL slot is a
// segfault) and accepts UNIMPLEMENTED; a success would make the whole TopologyDescription family
// mandatory, and ahead-of-time compilation without a client is not offered.
PJRT_Error* PJRT_Client_TopologyDescription(PJRT_Client_TopologyDescription_Args* args) {
  return TRN_HANDLE(PJRT_Client_TopologyDescription, topology) {
    return Unimplemented("trn: topology descriptions are not offered (no ahead-of-time "
                         "compilation without a client)");
  });
}

PJRT_Error* PJRT_Client_AddressableMemories(PJRT_Client_AddressableMemories_Args* args) {
  return TRN_HANDLE(PJRT_Client_AddressableMemories, num_addressable_memories) {
    TRN_UNWRAP(Client, client, args->client);
    args->addressable_memories = client->memories().data();
    args->num_addressable_memories = client->memories().size();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Client_Compile(PJRT_Client_Compile_Args* args) {
  return TRN_HANDLE(PJRT_Client_Compile, executable) {
    TRN_UNWRAP(Client, client, args->client);
    TRN_UNWRAP(const PJRT_Program, program, args->program);
    if (program->code == nullptr && program->code_size > 0) {
      return InvalidArgument("PJRT_Program.code is NULL");
    }
    TRN_ASSIGN_OR_RETURN(
        executable,
        client->Compile(Bytes(program->code, program->code_size),
                        Bytes(program->format, program->format_size),
                        Bytes(args->compile_options, args->compile_options_size)));
    args->executable = executable.release();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Client_DefaultDeviceAssignment(PJRT_Client_DefaultDeviceAssignment_Args* args) {
  return TRN_HANDLE(PJRT_Client_DefaultDeviceAssignment, default_assignment) {
    TRN_UNWRAP(Client, client, args->client);
    TRN_ASSIGN_OR_RETURN(assignment,
                         client->DefaultDeviceAssignment(args->num_replicas, args->num_partitions));
    if (args->default_assignment_size < assignment.size() ||
        args->default_assignment == nullptr) {
      return InvalidArgument("default_assignment holds " +
                             std::to_string(args->default_assignment_size) + " entries; " +
                             std::to_string(assignment.size()) + " are needed");
    }
    std::copy(assignment.begin(), assignment.end(), args->default_assignment);
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Client_BufferFromHostBuffer(PJRT_Client_BufferFromHostBuffer_Args* args) {
  return TRN_HANDLE(PJRT_Client_BufferFromHostBuffer, buffer) {
    TRN_UNWRAP(Client, client, args->client);
    Memory* memory = static_cast<Memory*>(args->memory);
    if (memory == nullptr) {
      TRN_UNWRAP(Device, device, args->device);
      memory = device->hbm();
    } else if (args->device != nullptr && memory->device() != args->device) {
      return InvalidArgument("memory " + memory->debug_string() + " does not belong to " +
                             static_cast<Device*>(args->device)->name());
    }
    if (args->num_dims > 0 && args->dims == nullptr) return InvalidArgument("dims is NULL");
    std::vector<int64_t> dims(args->dims, args->dims + args->num_dims);
    std::vector<int64_t> strides;
    if (args->byte_strides != nullptr) {
      strides.assign(args->byte_strides, args->byte_strides + args->num_byte_strides);
    }
    // The data is always copied before returning, which satisfies every host buffer semantics.
    TRN_ASSIGN_OR_RETURN(buffer, client->BufferFromHost(args->data, args->type, std::move(dims),
                                                        std::move(strides), args->device_layout,
                                                        memory));
    args->done_with_host_buffer = new Event();
    args->buffer = buffer.release();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Client_CreateUninitializedBuffer(
    PJRT_Client_CreateUninitializedBuffer_Args* args) {
  return TRN_HANDLE(PJRT_Client_CreateUninitializedBuffer, buffer) {
    TRN_UNWRAP(Client, client, args->client);
    Memory* memory = static_cast<Memory*>(args->memory);
    if (memory == nullptr) {
      TRN_UNWRAP(Device, device, args->device);
      memory = device->hbm();
    }
    if (args->shape_num_dims > 0 && args->shape_dims == nullptr) {
      return InvalidArgument("shape_dims is NULL");
    }
    std::vector<int64_t> dims(args->shape_dims, args->shape_dims + args->shape_num_dims);
    TRN_ASSIGN_OR_RETURN(buffer,
                         client->UninitializedBuffer(args->shape_element_type, std::move(dims),
                                                     args->shape_layout, memory));
    args->buffer = buffer.release();
    return Status::Ok();
  });
}

}  // namespace trn::pjrt
