#include "python_calls.h"  // first: Python.h must precede the standard headers

#include "compiler_bridge.h"
#include "sim/host_call_permit.h"

#include <dlfcn.h>

#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace trn::pjrt {
namespace {

StatusCode CodeFromName(const std::string& name) {
  if (name == "INVALID_ARGUMENT") return StatusCode::kInvalidArgument;
  if (name == "UNIMPLEMENTED") return StatusCode::kUnimplemented;
  if (name == "RESOURCE_EXHAUSTED") return StatusCode::kResourceExhausted;
  if (name == "FAILED_PRECONDITION") return StatusCode::kFailedPrecondition;
  if (name == "NOT_FOUND") return StatusCode::kNotFound;
  if (name == "OUT_OF_RANGE") return StatusCode::kOutOfRange;
  return StatusCode::kInternal;
}

// Converts the pending Python exception raised by the compiler into a Status and clears it.
Status StatusFromCompilerError() {
  PythonError error = PythonError::Fetch();
  if (!error.type) return Internal("internal compiler error: no exception was set");

  PyRef errors(PyImport_ImportModule("hlo_lowering.errors"));
  PyRef compile_error(errors ? PyObject_GetAttrString(errors.get(), "CompileError") : nullptr);
  PyErr_Clear();
  if (compile_error && PyErr_GivenExceptionMatches(error.type.get(), compile_error.get())) {
    return Status(CodeFromName(Attribute(error.value.get(), "code")),
                  PyString(error.value.get()));
  }
  std::string message = "internal compiler error: " + error.Summary();
  std::string tail =
      TracebackTail(error.type.get(), error.value.get(), error.traceback.get(), 6);
  if (!tail.empty()) message += "\n" + tail;
  PyErr_Clear();
  return Internal(message);
}

// A new reference to a Python value of a target figure.
PyObject* FigureValue(const sim::TargetFigure& figure) {
  if (const int64_t* i = std::get_if<int64_t>(&figure.value)) return PyLong_FromLongLong(*i);
  if (const double* d = std::get_if<double>(&figure.value)) return PyFloat_FromDouble(*d);
  return PyUnicode_FromString(std::get<const char*>(figure.value));
}

// Sets dict[name] = value, taking ownership of `value`; false on failure (exception pending).
bool SetItem(PyObject* dict, const char* name, PyObject* value) {
  PyRef owned(value);
  return owned && PyDict_SetItemString(dict, name, owned.get()) == 0;
}

// A new reference to an option override's value as Python's bool, int, float or str.
PyObject* OverrideValue(const std::variant<std::string, bool, int64_t, double>& value) {
  if (const bool* b = std::get_if<bool>(&value)) return PyBool_FromLong(*b);
  if (const int64_t* i = std::get_if<int64_t>(&value)) return PyLong_FromLongLong(*i);
  if (const double* d = std::get_if<double>(&value)) return PyFloat_FromDouble(*d);
  const std::string& text = std::get<std::string>(value);
  return PyUnicode_FromStringAndSize(text.data(), static_cast<Py_ssize_t>(text.size()));
}

// ((name, value), ...) of the option overrides, or nullptr with an exception pending.
PyObject* OverridesTuple(const CompileOptions& options) {
  PyObject* overrides = PyTuple_New(static_cast<Py_ssize_t>(options.option_overrides.size()));
  for (size_t i = 0; overrides != nullptr && i < options.option_overrides.size(); ++i) {
    const auto& [name, value] = options.option_overrides[i];
    PyObject* pair = Py_BuildValue("(s#N)", name.data(), static_cast<Py_ssize_t>(name.size()),
                                   OverrideValue(value));
    if (pair == nullptr) {
      Py_DECREF(overrides);
      return nullptr;
    }
    PyTuple_SET_ITEM(overrides, static_cast<Py_ssize_t>(i), pair);
  }
  return overrides;
}

// {"num_replicas": ..., "num_partitions": ...} and, when there are any, "option_overrides",
// or nullptr with an exception pending.
PyObject* OptionsDict(const CompileOptions& options) {
  PyObject* dict = PyDict_New();
  if (dict == nullptr ||
      !SetItem(dict, "num_replicas", PyLong_FromLongLong(options.num_replicas)) ||
      !SetItem(dict, "num_partitions", PyLong_FromLongLong(options.num_partitions)) ||
      (!options.option_overrides.empty() &&
       !SetItem(dict, "option_overrides", OverridesTuple(options)))) {
    Py_XDECREF(dict);
    return nullptr;
  }
  return dict;
}

// The target description with the device's LNC (its physical cores: the compiler splits an LNC=2
// device's work between its two cores) and the client's float64 policy (TRN_FLOAT64=float32:
// every float64 computed as float32), or nullptr with an exception pending.
PyObject* TargetDict(const ClientOptions& client) {
  PyObject* dict = PyDict_New();
  if (dict == nullptr) return nullptr;
  if (!SetItem(dict, "lnc", PyLong_FromLong(client.lnc)) ||
      (client.float64_arrays && !SetItem(dict, "float64", PyUnicode_FromString("float32")))) {
    Py_DECREF(dict);
    return nullptr;
  }
  for (const sim::TargetFigure& figure : sim::TargetFigures(*client.target)) {
    if (!SetItem(dict, figure.name, FigureValue(figure))) {
      Py_DECREF(dict);
      return nullptr;
    }
  }
  return dict;
}

StatusOr<std::string> CallCompiler(std::string_view code, std::string_view format,
                                   const CompileOptions& options, const ClientOptions& client) {
  PyRef service(PyImport_ImportModule("jax_trn.compilation"));
  if (!service) {
    return FailedPrecondition(
        "the trn compiler (jax_trn.compilation) could not be imported: " +
        PythonError::Fetch().Summary());
  }
  PyRef options_dict(OptionsDict(options));
  PyRef target_dict(options_dict ? TargetDict(client) : nullptr);
  if (!target_dict) {
    return Internal("internal compiler error: the compile arguments could not be built: " +
                    PythonError::Fetch().Summary());
  }
  PyRef result(PyObject_CallMethod(service.get(), "compile_for_pjrt", "y#s#OO", code.data(),
                                   static_cast<Py_ssize_t>(code.size()), format.data(),
                                   static_cast<Py_ssize_t>(format.size()), options_dict.get(),
                                   target_dict.get()));
  if (!result) return StatusFromCompilerError();
  char* data = nullptr;
  Py_ssize_t size = 0;
  if (PyBytes_AsStringAndSize(result.get(), &data, &size) != 0) {
    PyErr_Clear();
    return Internal("internal compiler error: compile_for_pjrt returned " +
                    Attribute(reinterpret_cast<PyObject*>(Py_TYPE(result.get())), "__name__") +
                    ", not bytes");
  }
  return std::string(data, size);
}

// {name: number} returned by cost_analysis_for_pjrt, as (name, value) pairs.
StatusOr<std::vector<std::pair<std::string, double>>> CallCostAnalysis(std::string_view source) {
  PyRef service(PyImport_ImportModule("jax_trn.compilation"));
  if (!service) {
    return FailedPrecondition(
        "the trn compiler (jax_trn.compilation) could not be imported: " +
        PythonError::Fetch().Summary());
  }
  PyRef result(PyObject_CallMethod(service.get(), "cost_analysis_for_pjrt", "y#", source.data(),
                                   static_cast<Py_ssize_t>(source.size())));
  if (!result) return StatusFromCompilerError();
  if (!PyDict_Check(result.get())) {
    return Internal("internal compiler error: cost_analysis_for_pjrt returned " +
                    Attribute(reinterpret_cast<PyObject*>(Py_TYPE(result.get())), "__name__") +
                    ", not dict");
  }
  std::vector<std::pair<std::string, double>> properties;
  PyObject* key = nullptr;
  PyObject* value = nullptr;
  for (Py_ssize_t position = 0; PyDict_Next(result.get(), &position, &key, &value);) {
    const double number = PyFloat_AsDouble(value);
    if (number == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      return Internal("internal compiler error: cost property " + PyString(key) +
                      " is not a number");
    }
    properties.emplace_back(PyString(key), number);
  }
  return properties;
}

// Runs `call` with the GIL held, or says why the compiler cannot be reached from this process.
template <typename Call>
auto InPython(std::string_view what, Call call) -> decltype(call()) {
  // Checked through the dynamic linker first: in a process without Python the API is absent.
  if (dlsym(RTLD_DEFAULT, "Py_IsInitialized") == nullptr || !Py_IsInitialized()) {
    return FailedPrecondition(
        "the trn compiler runs in-process in Python; load the plugin from a Python process");
  }
  const std::shared_ptr<sim::HostCallPermit> permit = sim::HostCallPermit::Acquire();
  if (permit == nullptr) {
    return Status(StatusCode::kCancelled,
                  "the Python interpreter is exiting: the program was not " + std::string(what));
  }
  GilLock gil;
  return call();
}

}  // namespace

StatusOr<std::string> CompileInPython(std::string_view code, std::string_view format,
                                      const CompileOptions& options,
                                      const ClientOptions& client) {
  return InPython("compiled", [&] { return CallCompiler(code, format, options, client); });
}

StatusOr<std::vector<std::pair<std::string, double>>> CostAnalysisInPython(
    std::string_view source) {
  return InPython("analysed", [&] { return CallCostAnalysis(source); });
}

}  // namespace trn::pjrt
