#include "layouts_extension.h"

#include <memory>
#include <string>

#include "buffer.h"
#include "c_api_shim.h"
#include "executable.h"

struct PJRT_Layouts_SerializedLayout {
  std::string bytes;
};

namespace trn::pjrt {
namespace {

void DeleteSerializedLayout(PJRT_Layouts_SerializedLayout* serialized) { delete serialized; }

PJRT_Error* PJRT_Layouts_MemoryLayout_Destroy(PJRT_Layouts_MemoryLayout_Destroy_Args* args) {
  return TRN_HANDLE(PJRT_Layouts_MemoryLayout_Destroy, layout) {
    delete args->layout;
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Layouts_MemoryLayout_Serialize(PJRT_Layouts_MemoryLayout_Serialize_Args* args) {
  return TRN_HANDLE(PJRT_Layouts_MemoryLayout_Serialize, serialized_layout_deleter) {
    TRN_UNWRAP(PJRT_Layouts_MemoryLayout, layout, args->layout);
    auto* serialized = new PJRT_Layouts_SerializedLayout{layout->text};
    args->serialized_bytes = serialized->bytes.data();
    args->serialized_bytes_size = serialized->bytes.size();
    args->serialized_layout = serialized;
    args->serialized_layout_deleter = DeleteSerializedLayout;
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Layouts_PJRT_Buffer_MemoryLayout(
    PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args* args) {
  return TRN_HANDLE(PJRT_Layouts_PJRT_Buffer_MemoryLayout, layout) {
    const Buffer* buffer = Buffer::FromHandle(args->buffer);
    if (buffer == nullptr) return InvalidArgument("buffer is NULL or not a trn buffer");
    args->layout = new PJRT_Layouts_MemoryLayout(RowMajorLayout(buffer->dims().size()));
    return Status::Ok();
  });
}

// Row-major whatever the element type: the plugin refuses the types it does not hold when a
// buffer of them is made, with the message that names them.
PJRT_Error* PJRT_Layouts_PJRT_Client_GetDefaultLayout(
    PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args* args) {
  return TRN_HANDLE(PJRT_Layouts_PJRT_Client_GetDefaultLayout, layout) {
    args->layout = new PJRT_Layouts_MemoryLayout(RowMajorLayout(args->num_dims));
    return Status::Ok();
  });
}

PJRT_Error* PJRT_Layouts_PJRT_Executable_GetOutputLayouts(
    PJRT_Layouts_PJRT_Executable_GetOutputLayouts_Args* args) {
  return TRN_HANDLE(PJRT_Layouts_PJRT_Executable_GetOutputLayouts, layouts) {
    TRN_UNWRAP(Executable, executable, args->executable);
    args->num_outputs = executable->output_layouts().size();
    // The C API hands out a non-const pointer; callers only read it.
    args->layouts = const_cast<PJRT_Layouts_MemoryLayout**>(executable->output_layouts().data());
    return Status::Ok();
  });
}

}  // namespace

PJRT_Layouts_MemoryLayout RowMajorLayout(size_t rank) {
  std::string text = "{";
  for (size_t d = rank; d-- > 0;) {
    text += std::to_string(d);
    if (d > 0) text += ",";
  }
  return PJRT_Layouts_MemoryLayout{text + "}"};
}

PJRT_Extension_Base* LayoutsExtension(PJRT_Extension_Base* next) {
  static PJRT_Layouts_Extension extension = {
      {sizeof(PJRT_Layouts_Extension), PJRT_Extension_Type_Layouts, next},
      &PJRT_Layouts_MemoryLayout_Destroy,
      &PJRT_Layouts_MemoryLayout_Serialize,
      &PJRT_Layouts_PJRT_Client_GetDefaultLayout,
      &PJRT_Layouts_PJRT_Buffer_MemoryLayout,
      nullptr,  // no topology (layouts_c_api.h)
      &PJRT_Layouts_PJRT_Executable_GetOutputLayouts,
      nullptr};
  return &extension.base;
}

}  // namespace trn::pjrt
