// What the plugin's calls into Python share (compiler_bridge.cc: the compiler;
// host_callback_bridge.cc: host callbacks): owned references, the GIL, and the pending exception
// as text.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>

#include <string>

namespace trn::pjrt {

// Whether the interpreter is finalizing. Python then ends any other thread that asks for the GIL
// (a forced unwind out of the C API call): the destructors that unwind runs must not touch
// Python. Py_IsFinalizing is public from 3.13, _Py_IsFinalizing before.
inline bool PythonFinalizing() {
  using IsFinalizing = int (*)();
  static const IsFinalizing finalizing = [] {
    void* f = dlsym(RTLD_DEFAULT, "Py_IsFinalizing");
    return reinterpret_cast<IsFinalizing>(f != nullptr ? f : dlsym(RTLD_DEFAULT, "_Py_IsFinalizing"));
  }();
  return finalizing != nullptr && finalizing() != 0;
}

// Whether this process runs a Python interpreter that can still be called: checked through the
// dynamic linker first (in a process without Python the API is absent).
inline bool PythonCallable() {
  return dlsym(RTLD_DEFAULT, "Py_IsInitialized") != nullptr && Py_IsInitialized() && !PythonFinalizing();
}

// Only functions of the Python C API are used here, never its data symbols (Py_None,
// PyExc_*): the plugin does not link libpython, so data relocations would make the library fail
// to load in a process without Python, where functions merely stay unbound until called.

// An owned reference, released on scope exit.
class PyRef {
 public:
  explicit PyRef(PyObject* object = nullptr) : object_(object) {}
  PyRef(const PyRef&) = delete;
  PyRef& operator=(const PyRef&) = delete;
  ~PyRef() {
    if (!PythonFinalizing()) Py_XDECREF(object_);  // a dying interpreter frees it anyway
  }
  PyObject* get() const { return object_; }
  explicit operator bool() const { return object_ != nullptr; }

 private:
  PyObject* object_;
};

inline std::string PyString(PyObject* object) {
  if (object == nullptr) return "";
  PyRef text(PyObject_Str(object));
  if (!text) {
    PyErr_Clear();
    return "<unprintable>";
  }
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(text.get(), &size);
  if (data == nullptr) {
    PyErr_Clear();
    return "<unprintable>";
  }
  return std::string(data, size);
}

inline std::string Attribute(PyObject* object, const char* name) {
  PyRef value(PyObject_GetAttrString(object, name));
  if (!value) {
    PyErr_Clear();
    return "";
  }
  return PyString(value.get());
}

// The last `lines` lines of the formatted traceback.
inline std::string TracebackTail(PyObject* type, PyObject* value, PyObject* traceback, int lines) {
  if (traceback == nullptr) return "";
  PyRef module(PyImport_ImportModule("traceback"));
  if (!module) {
    PyErr_Clear();
    return "";
  }
  PyRef formatted(PyObject_CallMethod(module.get(), "format_exception", "OOO", type, value,
                                      traceback));
  if (!formatted) {
    PyErr_Clear();
    return "";
  }
  PyRef joined(PyUnicode_Join(PyRef(PyUnicode_FromString("")).get(), formatted.get()));
  std::string text = joined ? PyString(joined.get()) : "";
  PyErr_Clear();
  while (!text.empty() && text.back() == '\n') text.pop_back();
  size_t start = text.size();
  for (int i = 0; i < lines && start != std::string::npos && start > 0; ++i) {
    start = text.rfind('\n', start - 1);
  }
  return start == std::string::npos ? text : text.substr(start + 1);
}

// The pending Python exception, fetched, normalised and cleared.
struct PythonError {
  PyRef type, value, traceback;

  static PythonError Fetch() {
    PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    return PythonError{PyRef(type), PyRef(value), PyRef(traceback)};
  }

  // "ModuleNotFoundError: No module named 'x'"
  std::string Summary() const {
    if (!type) return "unknown error (no exception was set)";
    return Attribute(type.get(), "__name__") + ": " + PyString(value.get());
  }
};

// Holds the GIL for the calling thread (a jaxlib compile worker that released it).
class GilLock {
 public:
  GilLock() : state_(PyGILState_Ensure()) {}
  ~GilLock() {
    if (PythonFinalizing()) return;  // this thread is being ended by Python (see above)
    PyErr_Clear();
    PyGILState_Release(state_);
  }

 private:
  PyGILState_STATE state_;
};

}  // namespace trn::pjrt
