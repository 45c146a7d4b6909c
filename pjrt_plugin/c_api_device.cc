// C-API handlers for device descriptions, devices and memory spaces.
#include "c_api_entry_points.h"
#include "c_api_shim.h"
#include "device.h"

namespace trn::pjrt {

PJRT_Error* PJRT_DeviceDescription_Id(PJRT_DeviceDescription_Id_Args* args) {
  return TRN_HANDLE(PJRT_DeviceDescription_Id, id) {
    TRN_UNWRAP(DeviceDescription, description, args->device_description);
    args->id = description->id();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_DeviceDescription_ProcessIndex(PJRT_DeviceDescription_ProcessIndex_Args* args) {
  return TRN_HANDLE(PJRT_DeviceDescription_ProcessIndex, process_index) {
    TRN_UNWRAP(DeviceDescription, description, args->device_description);
    args->process_index = description->process_index();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_DeviceDescription_Attributes(PJRT_DeviceDescription_Attributes_Args* args) {
  return TRN_HANDLE(PJRT_DeviceDescription_Attributes, attributes) {
    TRN_UNWRAP(DeviceDescription, description, args->device_description);
    args->num_attributes = description->attributes().size();
    args->attributes = description->attributes().data();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_DeviceDescription_Kind(PJRT_DeviceDescription_Kind_Args* args) {
  return TRN_HANDLE(PJRT_DeviceDescription_Kind, device_kind_size) {
    TRN_UNWRAP(DeviceDescription, description, args->device_description);
    args->device_kind = description->kind().data();
    args->device_kind_size = description->kind().size();
    return Status::Ok();
  });
}

// Python's str(device).
PJRT_Error* PJRT_DeviceDescription_DebugString(PJRT_DeviceDescription_DebugString_Args* args) {
  return TRN_HANDLE(PJRT_DeviceDescription_DebugString, debug_string_size) {
    TRN_UNWRAP(DeviceDescription, description, args->device_description);
    args->debug_string = description->name().data();
    args->debug_string_size = description->name().size();
    return Status::Ok();
  });
}

// Python's repr(device).
PJRT_Error* PJRT_DeviceDescription_ToString(PJRT_DeviceDescription_ToString_Args* args) {
  return TRN_HANDLE(PJRT_DeviceDescription_ToString, to_string_size) {
    TRN_UNWRAP(DeviceDescription, description, args->device_description);
    args->to_string = description->to_string().data();
    args->to_string_size = description->to_string().size();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Device_GetDescription(PJRT_Device_GetDescription_Args* args) {
  return TRN_HANDLE(PJRT_Device_GetDescription, device_description) {
    TRN_UNWRAP(Device, device, args->device);
    args->device_description = device->description();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Device_IsAddressable(PJRT_Device_IsAddressable_Args* args) {
  return TRN_HANDLE(PJRT_Device_IsAddressable, is_addressable) {
    args->is_addressable = true;
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Device_LocalHardwareId(PJRT_Device_LocalHardwareId_Args* args) {
  return TRN_HANDLE(PJRT_Device_LocalHardwareId, local_hardware_id) {
    TRN_UNWRAP(Device, device, args->device);
    args->local_hardware_id = device->local_hardware_id();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Device_AddressableMemories(PJRT_Device_AddressableMemories_Args* args) {
  return TRN_HANDLE(PJRT_Device_AddressableMemories, num_memories) {
    TRN_UNWRAP(Device, device, args->device);
    args->memories = device->memories().data();
    args->num_memories = device->memories().size();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Device_DefaultMemory(PJRT_Device_DefaultMemory_Args* args) {
  return TRN_HANDLE(PJRT_Device_DefaultMemory, memory) {
    TRN_UNWRAP(Device, device, args->device);
    args->memory = device->hbm();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Device_MemoryStats(PJRT_Device_MemoryStats_Args* args) {
  return TRN_HANDLE(PJRT_Device_MemoryStats, bytes_limit_is_set) {
    TRN_UNWRAP(Device, device, args->device);
    const MemoryStats stats = device->hbm()->stats();
    args->bytes_in_use = stats.bytes_in_use;
    args->peak_bytes_in_use = stats.peak_bytes_in_use;
    args->peak_bytes_in_use_is_set = true;
    args->num_allocs = stats.num_allocs;
    args->num_allocs_is_set = true;
    args->largest_alloc_size = stats.largest_alloc_size;
    args->largest_alloc_size_is_set = true;
    args->bytes_limit = stats.bytes_limit;
    args->bytes_limit_is_set = stats.has_limit;
    // Fields past bytes_limit_is_set (reservations, pools) do not apply to this allocator.
    if (TRN_HAS_FIELD(PJRT_Device_MemoryStats_Args, args, bytes_reserved_is_set)) {
      args->bytes_reserved_is_set = false;
    }
    if (TRN_HAS_FIELD(PJRT_Device_MemoryStats_Args, args, peak_bytes_reserved_is_set)) {
      args->peak_bytes_reserved_is_set = false;
    }
    if (TRN_HAS_FIELD(PJRT_Device_MemoryStats_Args, args, bytes_reservable_limit_is_set)) {
      args->bytes_reservable_limit_is_set = false;
    }
    if (TRN_HAS_FIELD(PJRT_Device_MemoryStats_Args, args, largest_free_block_bytes_is_set)) {
      args->largest_free_block_bytes_is_set = false;
    }
    if (TRN_HAS_FIELD(PJRT_Device_MemoryStats_Args, args, pool_bytes_is_set)) {
      args->pool_bytes_is_set = false;
    }
    if (TRN_HAS_FIELD(PJRT_Device_MemoryStats_Args, args, peak_pool_bytes_is_set)) {
      args->peak_pool_bytes_is_set = false;
    }
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Memory_Id(PJRT_Memory_Id_Args* args) {
  return TRN_HANDLE(PJRT_Memory_Id, id) {
    TRN_UNWRAP(Memory, memory, args->memory);
    args->id = memory->id();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Memory_Kind(PJRT_Memory_Kind_Args* args) {
  return TRN_HANDLE(PJRT_Memory_Kind, kind_size) {
    TRN_UNWRAP(Memory, memory, args->memory);
    args->kind = memory->kind_name().data();
    args->kind_size = memory->kind_name().size();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Memory_Kind_Id(PJRT_Memory_Kind_Id_Args* args) {
  return TRN_HANDLE(PJRT_Memory_Kind_Id, kind_id) {
    TRN_UNWRAP(Memory, memory, args->memory);
    args->kind_id = memory->kind_id();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Memory_DebugString(PJRT_Memory_DebugString_Args* args) {
  return TRN_HANDLE(PJRT_Memory_DebugString, debug_string_size) {
    TRN_UNWRAP(Memory, memory, args->memory);
    args->debug_string = memory->debug_string().data();
    args->debug_string_size = memory->debug_string().size();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Memory_ToString(PJRT_Memory_ToString_Args* args) {
  return TRN_HANDLE(PJRT_Memory_ToString, to_string_size) {
    TRN_UNWRAP(Memory, memory, args->memory);
    args->to_string = memory->to_string().data();
    args->to_string_size = memory->to_string().size();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Memory_AddressableByDevices(PJRT_Memory_AddressableByDevices_Args* args) {
  return TRN_HANDLE(PJRT_Memory_AddressableByDevices, num_devices) {
    TRN_UNWRAP(Memory, memory, args->memory);
    args->devices = memory->addressable_by().data();
    args->num_devices = memory->addressable_by().size();
    return Status::Ok();
  });
}

}  // namespace trn::pjrt
