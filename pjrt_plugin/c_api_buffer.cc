// C-API handlers for buffers and events.
#include <array>

#include "buffer.h"
#include "c_api_entry_points.h"
#include "c_api_shim.h"
#include "device.h"
#include "event.h"

namespace trn::pjrt {

PJRT_Error* PJRT_Event_Destroy(PJRT_Event_Destroy_Args* args) {
  return TRN_HANDLE(PJRT_Event_Destroy, event) {
    delete static_cast<Event*>(args->event);
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Event_IsReady(PJRT_Event_IsReady_Args* args) {
  return TRN_HANDLE(PJRT_Event_IsReady, is_ready) {
    TRN_UNWRAP(Event, event, args->event);
    args->is_ready = event->is_ready();
    return Status::Ok();
  });
}

// Clients call it on ready events; on one that is not ready yet it waits, like Await.
PJRT_Error* PJRT_Event_Error(PJRT_Event_Error_Args* args) {
  return TRN_HANDLE(PJRT_Event_Error, event) {
    TRN_UNWRAP(Event, event, args->event);
    return event->Await();
  });
}

PJRT_Error* PJRT_Event_Await(PJRT_Event_Await_Args* args) {
  return TRN_HANDLE(PJRT_Event_Await, event) {
    TRN_UNWRAP(Event, event, args->event);
    return event->Await();
  });
}

PJRT_Error* PJRT_Event_OnReady(PJRT_Event_OnReady_Args* args) {
  return TRN_HANDLE(PJRT_Event_OnReady, user_arg) {
    TRN_UNWRAP(Event, event, args->event);
    if (args->callback == nullptr) return InvalidArgument("callback is NULL");
    event->OnReady(args->callback, args->user_arg);
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Buffer_Destroy(PJRT_Buffer_Destroy_Args* args) {
  return TRN_HANDLE(PJRT_Buffer_Destroy, buffer) {
    delete static_cast<Buffer*>(args->buffer);
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Buffer_ElementType(PJRT_Buffer_ElementType_Args* args) {
  return TRN_HANDLE(PJRT_Buffer_ElementType, type) {
    TRN_UNWRAP(Buffer, buffer, args->buffer);
    args->type = buffer->element_type();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Buffer_Dimensions(PJRT_Buffer_Dimensions_Args* args) {
  return TRN_HANDLE(PJRT_Buffer_Dimensions, num_dims) {
    TRN_UNWRAP(Buffer, buffer, args->buffer);
    args->dims = buffer->dims().data();
    args->num_dims = buffer->dims().size();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Buffer_UnpaddedDimensions(PJRT_Buffer_UnpaddedDimensions_Args* args) {
  return TRN_HANDLE(PJRT_Buffer_UnpaddedDimensions, num_dims) {
    TRN_UNWRAP(Buffer, buffer, args->buffer);
    args->unpadded_dims = buffer->dims().data();
    args->num_dims = buffer->dims().size();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Buffer_DynamicDimensionIndices(PJRT_Buffer_DynamicDimensionIndices_Args* args) {
  return TRN_HANDLE(PJRT_Buffer_DynamicDimensionIndices, num_dynamic_dims) {
    args->dynamic_dim_indices = nullptr;
    args->num_dynamic_dims = 0;
    return Status::Ok();
  });
}

// Device buffers are dense row-major: minor_to_major = rank-1 .. 0, no tiles.
PJRT_Error* PJRT_Buffer_GetMemoryLayout(PJRT_Buffer_GetMemoryLayout_Args* args) {
  // Static, so the pointers handed out stay valid; ranks beyond this are refused.
  static constexpr int64_t kMaxRank = 64;
  static const auto kDescending = [] {
    std::array<std::array<int64_t, kMaxRank>, kMaxRank + 1> table{};
    for (int64_t rank = 0; rank <= kMaxRank; ++rank) {
      for (int64_t i = 0; i < rank; ++i) table[rank][i] = rank - 1 - i;
    }
    return table;
  }();
  return TRN_HANDLE(PJRT_Buffer_GetMemoryLayout, layout) {
    TRN_UNWRAP(Buffer, buffer, args->buffer);
    const int64_t rank = static_cast<int64_t>(buffer->dims().size());
    if (rank > kMaxRank) return Unimplemented("rank " + std::to_string(rank) + " > 64");
    args->layout = PJRT_Buffer_MemoryLayout{};
    args->layout.struct_size = PJRT_Buffer_MemoryLayout_STRUCT_SIZE;
    args->layout.type = PJRT_Buffer_MemoryLayout_Type_Tiled;
    args->layout.tiled.struct_size = PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE;
    args->layout.tiled.minor_to_major = kDescending[rank].data();
    args->layout.tiled.minor_to_major_size = rank;
    args->layout.tiled.num_tiles = 0;
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Buffer_OnDeviceSizeInBytes(PJRT_Buffer_OnDeviceSizeInBytes_Args* args) {
  return TRN_HANDLE(PJRT_Buffer_OnDeviceSizeInBytes, on_device_size_in_bytes) {
    TRN_UNWRAP(Buffer, buffer, args->buffer);
    args->on_device_size_in_bytes = buffer->byte_size();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Buffer_Device(PJRT_Buffer_Device_Args* args) {
  return TRN_HANDLE(PJRT_Buffer_Device, device) {
    TRN_UNWRAP(Buffer, buffer, args->buffer);
    args->device = buffer->device();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Buffer_Memory(PJRT_Buffer_Memory_Args* args) {
  return TRN_HANDLE(PJRT_Buffer_Memory, memory) {
    TRN_UNWRAP(Buffer, buffer, args->buffer);
    args->memory = buffer->memory();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Buffer_Delete(PJRT_Buffer_Delete_Args* args) {
  return TRN_HANDLE(PJRT_Buffer_Delete, buffer) {
    TRN_UNWRAP(Buffer, buffer, args->buffer);
    buffer->Delete();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Buffer_IsDeleted(PJRT_Buffer_IsDeleted_Args* args) {
  return TRN_HANDLE(PJRT_Buffer_IsDeleted, is_deleted) {
    TRN_UNWRAP(Buffer, buffer, args->buffer);
    args->is_deleted = buffer->is_deleted();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Buffer_CopyToDevice(PJRT_Buffer_CopyToDevice_Args* args) {
  return TRN_HANDLE(PJRT_Buffer_CopyToDevice, dst_buffer) {
    TRN_UNWRAP(Buffer, buffer, args->buffer);
    TRN_UNWRAP(Device, device, args->dst_device);
    TRN_ASSIGN_OR_RETURN(copy, buffer->CopyTo(device->hbm()));
    args->dst_buffer = copy.release();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Buffer_CopyToMemory(PJRT_Buffer_CopyToMemory_Args* args) {
  return TRN_HANDLE(PJRT_Buffer_CopyToMemory, dst_buffer) {
    TRN_UNWRAP(Buffer, buffer, args->buffer);
    TRN_UNWRAP(Memory, memory, args->dst_memory);
    TRN_ASSIGN_OR_RETURN(copy, buffer->CopyTo(memory));
    args->dst_buffer = copy.release();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Buffer_ToHostBuffer(PJRT_Buffer_ToHostBuffer_Args* args) {
  return TRN_HANDLE(PJRT_Buffer_ToHostBuffer, event) {
    TRN_UNWRAP(Buffer, buffer, args->src);
    if (args->dst == nullptr) {
      TRN_ASSIGN_OR_RETURN(size, buffer->HostByteSize(args->host_layout));
      args->dst_size = static_cast<size_t>(size);
      return Status::Ok();
    }
    TRN_ASSIGN_OR_RETURN(copied, buffer->ToHost(args->dst, args->dst_size, args->host_layout));
    args->event = new Event(std::move(copied));
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Buffer_CopyRawToHost(PJRT_Buffer_CopyRawToHost_Args* args) {
  return TRN_HANDLE(PJRT_Buffer_CopyRawToHost, event) {
    TRN_UNWRAP(Buffer, buffer, args->buffer);
    if (args->dst == nullptr && args->transfer_size > 0) return InvalidArgument("dst is NULL");
    TRN_ASSIGN_OR_RETURN(copied,
                         buffer->CopyRawToHost(args->dst, args->offset, args->transfer_size));
    args->event = new Event(std::move(copied));
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Buffer_IsOnCpu(PJRT_Buffer_IsOnCpu_Args* args) {
  return TRN_HANDLE(PJRT_Buffer_IsOnCpu, is_on_cpu) {
    args->is_on_cpu = false;
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Buffer_ReadyEvent(PJRT_Buffer_ReadyEvent_Args* args) {
  return TRN_HANDLE(PJRT_Buffer_ReadyEvent, event) {
    TRN_UNWRAP(Buffer, buffer, args->buffer);
    args->event = new Event(buffer->ready());
    return Status::Ok();
  });
}

// The address of the host storage standing for the buffer's device memory.
PJRT_Error* PJRT_Buffer_UnsafePointer(PJRT_Buffer_UnsafePointer_Args* args) {
  return TRN_HANDLE(PJRT_Buffer_UnsafePointer, buffer_pointer) {
    TRN_UNWRAP(Buffer, buffer, args->buffer);
    TRN_ASSIGN_OR_RETURN(allocation, buffer->allocation());
    args->buffer_pointer = reinterpret_cast<uintptr_t>(allocation->data());
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Buffer_OpaqueDeviceMemoryDataPointer(
    PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args* args) {
  return TRN_HANDLE(PJRT_Buffer_OpaqueDeviceMemoryDataPointer, device_memory_ptr) {
    TRN_UNWRAP(Buffer, buffer, args->buffer);
    TRN_ASSIGN_OR_RETURN(allocation, buffer->allocation());
    args->device_memory_ptr = allocation->data();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Buffer_IncreaseExternalReferenceCount(
    PJRT_Buffer_IncreaseExternalReferenceCount_Args* args) {
  return TRN_HANDLE(PJRT_Buffer_IncreaseExternalReferenceCount, buffer) {
    TRN_UNWRAP(Buffer, buffer, args->buffer);
    buffer->IncreaseExternalReferenceCount();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Buffer_DecreaseExternalReferenceCount(
    PJRT_Buffer_DecreaseExternalReferenceCount_Args* args) {
  return TRN_HANDLE(PJRT_Buffer_DecreaseExternalReferenceCount, buffer) {
    TRN_UNWRAP(Buffer, buffer, args->buffer);
    return buffer->DecreaseExternalReferenceCount();
  });
}

}  // namespace trn::pjrt
