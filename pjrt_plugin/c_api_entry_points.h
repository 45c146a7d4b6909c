// The PJRT C API 0.81 entry points this plugin implements, and those it leaves NULL. The binder
// fills the table from the first list; docs/pjrt-surface.md gives the reason for each entry of
// the second, and tests/test_pjrt_api_table.py checks the table against that document.
#pragma once

#include "pjrt_c_api.h"

#define TRN_PJRT_IMPLEMENTED(X)                                                               \
  X(PJRT_Error_Destroy) X(PJRT_Error_Message) X(PJRT_Error_GetCode)                           \
  X(PJRT_Plugin_Initialize) X(PJRT_Plugin_Attributes)                                         \
  X(PJRT_Event_Destroy) X(PJRT_Event_IsReady) X(PJRT_Event_Error) X(PJRT_Event_Await)         \
  X(PJRT_Event_OnReady)                                                                       \
  X(PJRT_Client_Create) X(PJRT_Client_Destroy) X(PJRT_Client_PlatformName)                    \
  X(PJRT_Client_ProcessIndex) X(PJRT_Client_PlatformVersion) X(PJRT_Client_Devices)           \
  X(PJRT_Client_AddressableDevices) X(PJRT_Client_LookupDevice)                               \
  X(PJRT_Client_LookupAddressableDevice) X(PJRT_Client_AddressableMemories)                   \
  X(PJRT_Client_Compile) X(PJRT_Client_DefaultDeviceAssignment)                               \
  X(PJRT_Client_BufferFromHostBuffer) X(PJRT_Client_CreateUninitializedBuffer)                \
  X(PJRT_Client_TopologyDescription)                                                          \
  X(PJRT_DeviceDescription_Id) X(PJRT_DeviceDescription_ProcessIndex)                         \
  X(PJRT_DeviceDescription_Attributes) X(PJRT_DeviceDescription_Kind)                         \
  X(PJRT_DeviceDescription_DebugString) X(PJRT_DeviceDescription_ToString)                    \
  X(PJRT_Device_GetDescription) X(PJRT_Device_IsAddressable) X(PJRT_Device_LocalHardwareId)   \
  X(PJRT_Device_AddressableMemories) X(PJRT_Device_DefaultMemory) X(PJRT_Device_MemoryStats)  \
  X(PJRT_Memory_Id) X(PJRT_Memory_Kind) X(PJRT_Memory_Kind_Id) X(PJRT_Memory_DebugString)     \
  X(PJRT_Memory_ToString) X(PJRT_Memory_AddressableByDevices)                                 \
  X(PJRT_Executable_Destroy) X(PJRT_Executable_Name) X(PJRT_Executable_NumReplicas)           \
  X(PJRT_Executable_NumPartitions) X(PJRT_Executable_NumOutputs)                              \
  X(PJRT_Executable_SizeOfGeneratedCodeInBytes) X(PJRT_Executable_GetCostAnalysis)            \
  X(PJRT_Executable_OutputMemoryKinds) X(PJRT_Executable_OptimizedProgram)                    \
  X(PJRT_Executable_Serialize) X(PJRT_Executable_OutputElementTypes)                          \
  X(PJRT_Executable_OutputDimensions) X(PJRT_Executable_Fingerprint)                          \
  X(PJRT_Executable_GetCompiledMemoryStats) X(PJRT_Executable_DeserializeAndLoad)             \
  X(PJRT_LoadedExecutable_Destroy) X(PJRT_LoadedExecutable_GetExecutable)                     \
  X(PJRT_LoadedExecutable_AddressableDevices) X(PJRT_LoadedExecutable_Delete)                 \
  X(PJRT_LoadedExecutable_IsDeleted) X(PJRT_LoadedExecutable_Execute)                         \
  X(PJRT_LoadedExecutable_Fingerprint) X(PJRT_LoadedExecutable_GetDeviceAssignment)           \
  X(PJRT_Buffer_Destroy) X(PJRT_Buffer_ElementType) X(PJRT_Buffer_Dimensions)                 \
  X(PJRT_Buffer_UnpaddedDimensions) X(PJRT_Buffer_DynamicDimensionIndices)                    \
  X(PJRT_Buffer_GetMemoryLayout) X(PJRT_Buffer_OnDeviceSizeInBytes) X(PJRT_Buffer_Device)     \
  X(PJRT_Buffer_Memory) X(PJRT_Buffer_Delete) X(PJRT_Buffer_IsDeleted)                        \
  X(PJRT_Buffer_CopyToDevice) X(PJRT_Buffer_CopyToMemory) X(PJRT_Buffer_ToHostBuffer)         \
  X(PJRT_Buffer_CopyRawToHost) X(PJRT_Buffer_IsOnCpu) X(PJRT_Buffer_ReadyEvent)               \
  X(PJRT_Buffer_UnsafePointer) X(PJRT_Buffer_IncreaseExternalReferenceCount)                  \
  X(PJRT_Buffer_DecreaseExternalReferenceCount) X(PJRT_Buffer_OpaqueDeviceMemoryDataPointer)

namespace trn::pjrt {

// Each handler has the C API's own function type and name, inside trn::pjrt.
#define TRN_DECLARE_HANDLER(name) ::name name;
TRN_PJRT_IMPLEMENTED(TRN_DECLARE_HANDLER)
#undef TRN_DECLARE_HANDLER

}  // namespace trn::pjrt
