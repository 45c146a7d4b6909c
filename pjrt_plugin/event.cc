#include "event.h"

#include "error.h"

namespace trn::pjrt {

void Event::OnReady(PJRT_Event_OnReadyCallback callback, void* user_arg) const {
  callback(ToPjrtError(status_, "PJRT_Event_OnReady"), user_arg);
}

}  // namespace trn::pjrt
