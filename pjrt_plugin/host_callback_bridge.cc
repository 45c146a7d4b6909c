#include "python_calls.h"  // first: Python.h must precede the standard headers

#include "host_callback_bridge.h"

#include <algorithm>
#include <vector>

#include "sim/program.h"

namespace trn::pjrt {
namespace {

// A tuple of memoryviews over `spans` (read-only or writable), or nullptr with an exception set.
template <typename Span>
PyObject* Views(const std::vector<Span>& spans, int flags, std::vector<PyObject*>& made) {
  PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(spans.size()));
  if (tuple == nullptr) return nullptr;
  for (size_t i = 0; i < spans.size(); ++i) {
    // A zero-length view still needs a valid address.
    static char empty = 0;
    char* data = spans[i].second > 0 ? reinterpret_cast<char*>(const_cast<uint8_t*>(spans[i].first)) : &empty;
    PyObject* view = PyMemoryView_FromMemory(data, spans[i].second, flags);
    if (view == nullptr) {
      Py_DECREF(tuple);
      return nullptr;
    }
    made.push_back(view);
    PyTuple_SetItem(tuple, static_cast<Py_ssize_t>(i), view);  // steals; `made` only borrows
  }
  return tuple;
}

// The views point into the runtime's buffers, which outlive the call only briefly: a callable
// that kept one would read freed memory, so every view is released (later use raises).
void Release(const std::vector<PyObject*>& views) {
  for (PyObject* view : views) {
    PyRef done(PyObject_CallMethod(view, "release", nullptr));
    PyErr_Clear();
  }
}

Status CallHostCallback(const sim::HostCallbackCall& call) {
  PyRef module(PyImport_ImportModule("jax_trn.host_callbacks"));
  if (!module) {
    return FailedPrecondition("host callback: jax_trn.host_callbacks could not be imported: " +
                              PythonError::Fetch().Summary());
  }
  std::vector<PyObject*> views;
  PyRef operands(Views(call.operands, PyBUF_READ, views));
  PyRef results(operands ? Views(call.results, PyBUF_WRITE, views) : nullptr);
  PyRef key(PyLong_FromUnsignedLongLong(call.callback));
  if (!results || !key) {
    return Internal("host callback: its arguments could not be built: " + PythonError::Fetch().Summary());
  }
  PyRef returned(PyObject_CallMethod(module.get(), "run", "OiOO", key.get(), call.rank, operands.get(), results.get()));
  if (!returned) {
    PythonError error = PythonError::Fetch();
    std::string message = "host callback raised " + error.Summary();
    const std::string tail = TracebackTail(error.type.get(), error.value.get(), error.traceback.get(), 6);
    if (!tail.empty()) message += "\n" + tail;
    PyErr_Clear();
    Release(views);
    return Internal(message);
  }
  Release(views);
  return Status::Ok();
}

// jax_trn.host_callbacks.<function>(keys); a failure is only logged by Python's machinery (it
// changes nothing but how long a callable stays registered).
void CallWithKeys(const char* function, const std::vector<uint64_t>& keys) {
  PyRef module(PyImport_ImportModule("jax_trn.host_callbacks"));
  PyRef list(module ? PyList_New(0) : nullptr);
  for (uint64_t key : keys) {
    PyRef item(list ? PyLong_FromUnsignedLongLong(key) : nullptr);
    if (!item || PyList_Append(list.get(), item.get()) != 0) return;
  }
  if (list) PyRef(PyObject_CallMethod(module.get(), function, "O", list.get()));
}

}  // namespace

Status RunHostCallbackInPython(const sim::HostCallPermit* permit, const sim::HostCallbackCall& call) {
  if (dlsym(RTLD_DEFAULT, "Py_IsInitialized") == nullptr || !Py_IsInitialized()) {
    return FailedPrecondition("host callbacks call Python; this process has no Python interpreter");
  }
  if (permit == nullptr) {
    return Status(StatusCode::kCancelled, "the Python interpreter is exiting: the host callback was not run");
  }
  GilLock gil;
  return CallHostCallback(call);
}

std::shared_ptr<HostCallbackLease> HostCallbackLease::ForProgram(const sim::LoadedProgram& program) {
  std::vector<uint64_t> keys;
  for (const sim::Block& block : program.program().blocks) {
    for (const auto& stream : block.streams) {
      for (const sim::Instruction& inst : stream) {
        if (inst.opcode == sim::Opcode::kHostCallback) keys.push_back(std::get<sim::HostCallback>(inst.operands).callback);
      }
    }
  }
  if (keys.empty()) return nullptr;
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return std::make_shared<HostCallbackLease>(std::move(keys));
}

HostCallbackLease::HostCallbackLease(std::vector<uint64_t> keys) : keys_(std::move(keys)) {
  const std::shared_ptr<sim::HostCallPermit> permit = sim::HostCallPermit::Acquire();
  if (permit == nullptr || !PythonCallable()) return;
  GilLock gil;
  CallWithKeys("hold", keys_);
}

HostCallbackLease::~HostCallbackLease() {
  const std::shared_ptr<sim::HostCallPermit> permit = sim::HostCallPermit::Acquire();
  if (permit == nullptr || !PythonCallable()) return;  // an exiting interpreter frees the registry itself
  GilLock gil;
  CallWithKeys("release", keys_);
}

}  // namespace trn::pjrt
