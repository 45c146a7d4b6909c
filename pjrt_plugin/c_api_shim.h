// The C-API shim's common part: every handler checks its argument struct, runs one call on a
// plugin object and converts the resulting Status into a PJRT_Error naming the entry point.
// Nothing thrown inside escapes a handler, and nothing here aborts.
#pragma once

#include <cstddef>
#include <exception>
#include <new>
#include <string>

#include "error.h"
#include "pjrt_c_api.h"
#include "sim/status.h"

namespace trn::pjrt {

// Bytes of `Args` up to and including `field`: what a caller must send for the handler to read
// or write `field`.
#define TRN_FIELD_END(Args, field) (offsetof(Args, field) + sizeof(static_cast<Args*>(nullptr)->field))

// Whether the caller's struct (possibly from an older header) includes `field`.
#define TRN_HAS_FIELD(Args, args, field) ((args)->struct_size >= TRN_FIELD_END(Args, field))

// body()'s Status, or the error a C++ exception thrown inside it stands for.
template <typename Body>
Status Guarded(Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("trn: the host ran out of memory");
  } catch (const std::exception& e) {
    return Internal(std::string("trn plugin error: ") + e.what());
  } catch (...) {
    return Internal("trn plugin error: unknown exception");
  }
}

template <typename Args, typename Body>
PJRT_Error* Handle(const char* entry_point, const char* args_name, Args* args, size_t required,
                   Body&& body) noexcept {
  return ToPjrtError(Guarded([&]() -> Status {
                       if (args == nullptr) return InvalidArgument(std::string(args_name) + " is NULL");
                       if (args->struct_size < required) {
                         return InvalidArgument(std::string(args_name) + ": expected struct_size >= " +
                                                std::to_string(required) + ", got " +
                                                std::to_string(args->struct_size));
                       }
                       return body();
                     }),
                     entry_point);
}

// return TRN_HANDLE(PJRT_Buffer_Dimensions, num_dims) { ...; return Status::Ok(); });
// `last_field` is the last field the handler reads or writes unconditionally.
#define TRN_HANDLE(name, last_field) \
  Handle(#name, #name "_Args", args, TRN_FIELD_END(name##_Args, last_field), [&]() -> Status

// Casts a handle to its plugin class, or returns INVALID_ARGUMENT from the handler if NULL.
#define TRN_UNWRAP(Type, var, handle)                                \
  Type* var = static_cast<Type*>(handle);                            \
  if (var == nullptr) return InvalidArgument(#handle " is NULL")

// Assigns the value of a StatusOr expression, or returns its error from the handler.
#define TRN_ASSIGN_OR_RETURN(var, expr)                  \
  auto var##_or = (expr);                                \
  if (!var##_or.ok()) return var##_or.status();          \
  auto& var = *var##_or

}  // namespace trn::pjrt
