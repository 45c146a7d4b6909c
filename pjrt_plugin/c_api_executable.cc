// C-API handlers for executables and loaded executables.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "c_api_entry_points.h"
#include "c_api_shim.h"
#include "client.h"
#include "device.h"
#include "event.h"
#include "executable.h"
#include "loaded_executable.h"

// Results handed to the caller with their own deleters.
struct PJRT_SerializedExecutable {
  std::shared_ptr<const trn::sim::LoadedProgram> program;  // its bytes are the serialization
};
struct PJRT_DeviceAssignmentSerialized {
  std::string bytes;  // xla.DeviceAssignmentProto
};

namespace trn::pjrt {
namespace {

constexpr char kProgramFormat[] = "mlir";

void DeleteSerializedExecutable(PJRT_SerializedExecutable* serialized) { delete serialized; }

void DeleteDeviceAssignment(PJRT_DeviceAssignmentSerialized* assignment) { delete assignment; }

}  // namespace

PJRT_Error* PJRT_Executable_Destroy(PJRT_Executable_Destroy_Args* args) {
  return TRN_HANDLE(PJRT_Executable_Destroy, executable) {
    delete static_cast<Executable*>(args->executable);
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Executable_Name(PJRT_Executable_Name_Args* args) {
  return TRN_HANDLE(PJRT_Executable_Name, executable_name_size) {
    TRN_UNWRAP(Executable, executable, args->executable);
    args->executable_name = executable->name().data();
    args->executable_name_size = executable->name().size();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Executable_NumReplicas(PJRT_Executable_NumReplicas_Args* args) {
  return TRN_HANDLE(PJRT_Executable_NumReplicas, num_replicas) {
    args->num_replicas = 1;
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Executable_NumPartitions(PJRT_Executable_NumPartitions_Args* args) {
  return TRN_HANDLE(PJRT_Executable_NumPartitions, num_partitions) {
    TRN_UNWRAP(Executable, executable, args->executable);
    args->num_partitions = executable->num_partitions();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Executable_NumOutputs(PJRT_Executable_NumOutputs_Args* args) {
  return TRN_HANDLE(PJRT_Executable_NumOutputs, num_outputs) {
    TRN_UNWRAP(Executable, executable, args->executable);
    args->num_outputs = executable->num_outputs();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Executable_SizeOfGeneratedCodeInBytes(
    PJRT_Executable_SizeOfGeneratedCodeInBytes_Args* args) {
  return TRN_HANDLE(PJRT_Executable_SizeOfGeneratedCodeInBytes, size_in_bytes) {
    TRN_UNWRAP(Executable, executable, args->executable);
    args->size_in_bytes = executable->memory_stats().generated_code_bytes;
    return Status::Ok();
  });
}

// The source program's static cost as XLA counts it; the timing model reports per execution.
PJRT_Error* PJRT_Executable_GetCostAnalysis(PJRT_Executable_GetCostAnalysis_Args* args) {
  return TRN_HANDLE(PJRT_Executable_GetCostAnalysis, properties) {
    TRN_UNWRAP(Executable, executable, args->executable);
    TRN_ASSIGN_OR_RETURN(properties, executable->cost_analysis());
    args->num_properties = properties->size();
    args->properties = properties->data();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Executable_OutputMemoryKinds(PJRT_Executable_OutputMemoryKinds_Args* args) {
  return TRN_HANDLE(PJRT_Executable_OutputMemoryKinds, memory_kind_sizes) {
    TRN_UNWRAP(Executable, executable, args->executable);
    args->num_outputs = executable->num_outputs();
    args->memory_kinds = executable->output_memory_kinds().data();
    args->memory_kind_sizes = executable->output_memory_kind_sizes().data();
    return Status::Ok();
  });
}

// The StableHLO text the program was compiled from. Two calls: code NULL asks for the size.
PJRT_Error* PJRT_Executable_OptimizedProgram(PJRT_Executable_OptimizedProgram_Args* args) {
  return TRN_HANDLE(PJRT_Executable_OptimizedProgram, program) {
    TRN_UNWRAP(Executable, executable, args->executable);
    TRN_UNWRAP(PJRT_Program, program, args->program);
    const std::string& source = executable->program().source();
    if (source.empty()) {
      return FailedPrecondition("the program carries no source text (it was not built from "
                                "StableHLO)");
    }
    program->format = kProgramFormat;
    program->format_size = sizeof(kProgramFormat) - 1;
    if (program->code == nullptr) {
      program->code_size = source.size();
      return Status::Ok();
    }
    if (program->code_size < source.size()) {
      return InvalidArgument("PJRT_Program.code holds " + std::to_string(program->code_size) +
                             " bytes; the program text needs " + std::to_string(source.size()));
    }
    std::memcpy(program->code, source.data(), source.size());
    program->code_size = source.size();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Executable_Serialize(PJRT_Executable_Serialize_Args* args) {
  return TRN_HANDLE(PJRT_Executable_Serialize, serialized_executable_deleter) {
    TRN_UNWRAP(const Executable, executable, args->executable);
    auto* serialized = new PJRT_SerializedExecutable{executable->shared_program()};
    args->serialized_bytes = reinterpret_cast<const char*>(serialized->program->bytes().data());
    args->serialized_bytes_size = serialized->program->bytes().size();
    args->serialized_executable = serialized;
    args->serialized_executable_deleter = DeleteSerializedExecutable;
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Executable_OutputElementTypes(PJRT_Executable_OutputElementTypes_Args* args) {
  return TRN_HANDLE(PJRT_Executable_OutputElementTypes, num_output_types) {
    TRN_UNWRAP(Executable, executable, args->executable);
    // The C API hands out a non-const pointer; callers only read it.
    args->output_types = const_cast<PJRT_Buffer_Type*>(executable->output_types().data());
    args->num_output_types = executable->output_types().size();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Executable_OutputDimensions(PJRT_Executable_OutputDimensions_Args* args) {
  return TRN_HANDLE(PJRT_Executable_OutputDimensions, dim_sizes) {
    TRN_UNWRAP(Executable, executable, args->executable);
    args->num_outputs = executable->num_outputs();
    args->dims = executable->output_dims().data();
    args->dim_sizes = executable->output_ranks().data();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Executable_Fingerprint(PJRT_Executable_Fingerprint_Args* args) {
  return TRN_HANDLE(PJRT_Executable_Fingerprint, executable_fingerprint_size) {
    TRN_UNWRAP(Executable, executable, args->executable);
    args->executable_fingerprint = executable->fingerprint().data();
    args->executable_fingerprint_size = executable->fingerprint().size();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Executable_GetCompiledMemoryStats(
    PJRT_Executable_GetCompiledMemoryStats_Args* args) {
  return TRN_HANDLE(PJRT_Executable_GetCompiledMemoryStats, host_temp_size_in_bytes) {
    TRN_UNWRAP(Executable, executable, args->executable);
    const CompiledMemoryStats stats = executable->memory_stats();
    args->generated_code_size_in_bytes = stats.generated_code_bytes;
    args->argument_size_in_bytes = stats.argument_bytes;
    args->output_size_in_bytes = stats.output_bytes;
    args->alias_size_in_bytes = 0;
    args->temp_size_in_bytes = stats.temp_bytes;
    args->host_generated_code_size_in_bytes = 0;
    args->host_argument_size_in_bytes = 0;
    args->host_output_size_in_bytes = 0;
    args->host_alias_size_in_bytes = 0;
    args->host_temp_size_in_bytes = 0;
    if (TRN_HAS_FIELD(PJRT_Executable_GetCompiledMemoryStats_Args, args, peak_memory_in_bytes)) {
      args->peak_memory_in_bytes = stats.peak_bytes;
    }
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Executable_DeserializeAndLoad(PJRT_Executable_DeserializeAndLoad_Args* args) {
  return TRN_HANDLE(PJRT_Executable_DeserializeAndLoad, loaded_executable) {
    TRN_UNWRAP(Client, client, args->client);
    if (args->serialized_executable == nullptr) {
      return InvalidArgument("serialized_executable is NULL");
    }
    std::string_view options;
    if (TRN_HAS_FIELD(PJRT_Executable_DeserializeAndLoad_Args, args,
                      overridden_serialized_compile_options_size) &&
        args->overridden_serialized_compile_options != nullptr) {
      options = std::string_view(args->overridden_serialized_compile_options,
                                 args->overridden_serialized_compile_options_size);
    }
    TRN_ASSIGN_OR_RETURN(
        executable,
        client->DeserializeAndLoad(
            std::string_view(args->serialized_executable, args->serialized_executable_size),
            options));
    args->loaded_executable = executable.release();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_LoadedExecutable_Destroy(PJRT_LoadedExecutable_Destroy_Args* args) {
  return TRN_HANDLE(PJRT_LoadedExecutable_Destroy, executable) {
    delete static_cast<LoadedExecutable*>(args->executable);
    return Status::Ok();
  });
}

// A new PJRT_Executable sharing the program; the caller destroys it with Executable_Destroy.
PJRT_Error* PJRT_LoadedExecutable_GetExecutable(PJRT_LoadedExecutable_GetExecutable_Args* args) {
  return TRN_HANDLE(PJRT_LoadedExecutable_GetExecutable, executable) {
    TRN_UNWRAP(LoadedExecutable, loaded, args->loaded_executable);
    args->executable = new Executable(loaded->executable()->shared_program(),
                                      loaded->executable()->num_partitions());
    return Status::Ok();
  });
}

PJRT_Error* PJRT_LoadedExecutable_AddressableDevices(
    PJRT_LoadedExecutable_AddressableDevices_Args* args) {
  return TRN_HANDLE(PJRT_LoadedExecutable_AddressableDevices, num_addressable_devices) {
    TRN_UNWRAP(LoadedExecutable, executable, args->executable);
    args->addressable_devices = executable->addressable_devices().data();
    args->num_addressable_devices = executable->addressable_devices().size();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_LoadedExecutable_Delete(PJRT_LoadedExecutable_Delete_Args* args) {
  return TRN_HANDLE(PJRT_LoadedExecutable_Delete, executable) {
    TRN_UNWRAP(LoadedExecutable, executable, args->executable);
    executable->Delete();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_LoadedExecutable_IsDeleted(PJRT_LoadedExecutable_IsDeleted_Args* args) {
  return TRN_HANDLE(PJRT_LoadedExecutable_IsDeleted, is_deleted) {
    TRN_UNWRAP(LoadedExecutable, executable, args->executable);
    args->is_deleted = executable->is_deleted();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_LoadedExecutable_Execute(PJRT_LoadedExecutable_Execute_Args* args) {
  return TRN_HANDLE(PJRT_LoadedExecutable_Execute, device_complete_events) {
    TRN_UNWRAP(LoadedExecutable, executable, args->executable);
    const size_t cores = executable->devices().size();
    if (args->argument_lists == nullptr) return InvalidArgument("argument_lists is NULL");
    const bool has_outputs = executable->executable()->num_outputs() > 0;
    if (has_outputs && args->output_lists == nullptr) return InvalidArgument("output_lists is NULL");
    for (size_t d = 0; has_outputs && d < args->num_devices; ++d) {
      if (args->output_lists[d] == nullptr) return InvalidArgument("output_lists[" + std::to_string(d) + "] is NULL");
    }
    // Every argument an output may reuse is donated unless the caller lists it as not donatable.
    const PJRT_ExecuteOptions* options = args->options;
    auto may_donate = [options](size_t argument) {
      if (options == nullptr ||
          !TRN_HAS_FIELD(PJRT_ExecuteOptions, options, num_non_donatable_input_indices) ||
          options->non_donatable_input_indices == nullptr) {
        return true;
      }
      const int64_t* begin = options->non_donatable_input_indices;
      const int64_t* end = begin + options->num_non_donatable_input_indices;
      return std::find(begin, end, static_cast<int64_t>(argument)) == end;
    };
    if (cores > 1) {
      // One execution over every core of the device assignment (docs/multi-device.md).
      if (args->num_devices != cores) {
        return InvalidArgument("the executable runs on " + std::to_string(cores) +
                               " devices; got argument lists for " + std::to_string(args->num_devices));
      }
      TRN_ASSIGN_OR_RETURN(executions, executable->ExecuteOnAllCores(args->argument_lists, args->num_args,
                                                                            may_donate));
      for (size_t d = 0; d < cores; ++d) {
        for (size_t i = 0; i < executions[d].outputs.size(); ++i) {
          args->output_lists[d][i] = executions[d].outputs[i].release();
        }
        if (args->device_complete_events != nullptr) {
          args->device_complete_events[d] = new Event(std::move(executions[d].done));
        }
      }
      return Status::Ok();
    }
    if (args->num_devices != 1) {
      return InvalidArgument("the executable runs on 1 device; got argument lists for " +
                             std::to_string(args->num_devices));
    }
    Device* device = executable->device();
    if (TRN_HAS_FIELD(PJRT_LoadedExecutable_Execute_Args, args, execute_device) &&
        args->execute_device != nullptr) {
      device = static_cast<Device*>(args->execute_device);
    }
    TRN_ASSIGN_OR_RETURN(execution, executable->Execute(device, args->argument_lists[0],
                                                        args->num_args, may_donate));
    for (size_t i = 0; i < execution.outputs.size(); ++i) {
      args->output_lists[0][i] = execution.outputs[i].release();
    }
    if (args->device_complete_events != nullptr) {
      args->device_complete_events[0] = new Event(std::move(execution.done));
    }
    return Status::Ok();
  });
}

PJRT_Error* PJRT_LoadedExecutable_Fingerprint(PJRT_LoadedExecutable_Fingerprint_Args* args) {
  return TRN_HANDLE(PJRT_LoadedExecutable_Fingerprint, executable_fingerprint_size) {
    TRN_UNWRAP(LoadedExecutable, executable, args->executable);
    args->executable_fingerprint = executable->executable()->fingerprint().data();
    args->executable_fingerprint_size = executable->executable()->fingerprint().size();
    return Status::Ok();
  });
}

PJRT_Error* PJRT_LoadedExecutable_GetDeviceAssignment(
    PJRT_LoadedExecutable_GetDeviceAssignment_Args* args) {
  return TRN_HANDLE(PJRT_LoadedExecutable_GetDeviceAssignment,
                    serialized_device_assignment_deleter) {
    TRN_UNWRAP(LoadedExecutable, executable, args->executable);
    auto* assignment = new PJRT_DeviceAssignmentSerialized{executable->SerializedDeviceAssignment()};
    args->serialized_bytes = assignment->bytes.data();
    args->serialized_bytes_size = assignment->bytes.size();
    args->serialized_device_assignment = assignment;
    args->serialized_device_assignment_deleter = DeleteDeviceAssignment;
    return Status::Ok();
  });
}

}  // namespace trn::pjrt
