// PJRT_Event: completion of a transfer or an execution. Every operation of this plugin finishes
// before its entry point returns (the simulator runs synchronously), so an event is born
// complete, carrying the operation's final status.
#pragma once

#include "pjrt_c_api.h"
#include "sim/status.h"

struct PJRT_Event {};

namespace trn::pjrt {

class Event : public PJRT_Event {
 public:
  explicit Event(Status status = Status::Ok()) : status_(std::move(status)) {}

  bool is_ready() const { return true; }
  const Status& status() const { return status_; }

  // Runs `callback` now, on the caller's thread: the event is already complete. The callback
  // owns the PJRT_Error it receives (NULL on success).
  void OnReady(PJRT_Event_OnReadyCallback callback, void* user_arg) const;

 private:
  Status status_;
};

}  // namespace trn::pjrt
