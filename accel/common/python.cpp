// The C entries' Python side: the interpreter's functions, looked up in the
// process (the interpreter exports them to every extension), the argument
// conversions, and the function the loader calls for an op's entry.
#include <dlfcn.h>

#include "accel/common/python.h"

namespace fusedops::accel {
namespace {

template <typename T>
bool find(T& out, const char* name) {
  out = reinterpret_cast<T>(dlsym(RTLD_DEFAULT, name));
  return out != nullptr;
}

}  // namespace

const Python* python() {
  static const Python* const found = []() -> const Python* {
    static Python py;
    const bool all = find(py.save_thread, "PyEval_SaveThread") &&
                     find(py.restore_thread, "PyEval_RestoreThread") &&
                     find(py.new_function, "PyCFunction_NewEx") && find(py.call, "PyObject_Call") &&
                     find(py.new_tuple, "PyTuple_New") && find(py.set_tuple_item, "PyTuple_SetItem") &&
                     find(py.incref, "Py_IncRef") && find(py.decref, "Py_DecRef") &&
                     find(py.float_value, "PyFloat_AsDouble") && find(py.int_value, "PyLong_AsDouble") &&
                     find(py.utf8, "PyUnicode_AsUTF8AndSize") && find(py.error_occurred, "PyErr_Occurred") &&
                     find(py.clear_error, "PyErr_Clear") && find(py.none, "_Py_NoneStruct") &&
                     find(py.true_, "_Py_TrueStruct") && find(py.false_, "_Py_FalseStruct") &&
                     find(py.float_type, "PyFloat_Type") && find(py.int_type, "PyLong_Type") &&
                     find(py.str_type, "PyUnicode_Type");
    return all ? &py : nullptr;
  }();
  return found;
}

bool optional_tensor(PyObject* o, OptTensor& out) {
  if (o == python()->none) return true;
  if (!plain_tensor(o)) return false;
  out = tensor_of(o);
  return true;
}

bool optional_string(PyObject* o, std::optional<c10::string_view>& out) {
  const Python& py = *python();
  if (o == py.none) return true;
  if (Py_TYPE(o) != py.str_type) return false;
  Py_ssize_t size = 0;
  const char* text = py.utf8(o, &size);
  if (text == nullptr) {  // not encodable as UTF-8: the fallback says so
    py.clear_error();
    return false;
  }
  out = c10::string_view(text, static_cast<size_t>(size));
  return true;
}

bool number(PyObject* o, double& out) {
  const Python& py = *python();
  if (Py_TYPE(o) == py.float_type) {
    out = py.float_value(o);
    return true;
  }
  if (Py_TYPE(o) != py.int_type) return false;  // bool, numpy scalars, ...: the fallback's rules
  out = py.int_value(o);
  if (out == -1.0 && py.error_occurred() != nullptr) {  // too large for a double: the fallback says so
    py.clear_error();
    return false;
  }
  return true;
}

bool integer(PyObject* o, int64_t& out) {
  constexpr double kExact = 9007199254740992.0;  // 2^53
  double value = 0;
  if (Py_TYPE(o) != python()->int_type || !number(o, value) || !(value >= -kExact && value <= kExact))
    return false;
  out = static_cast<int64_t>(value);
  return true;
}

bool optional_number(PyObject* o, std::optional<double>& out) {
  if (o == python()->none) return true;
  double value = 0;
  if (!number(o, value)) return false;
  out = value;
  return true;
}

bool boolean(PyObject* o, bool& out) {
  const Python& py = *python();
  if (o != py.true_ && o != py.false_) return false;  // 0, 1, numpy bools, ...: the fallback's rules
  out = o == py.true_;
  return true;
}

PyObject* call_fallback(PyObject* fallback, PyObject* const* args, Py_ssize_t n) {
  const Python& py = *python();
  PyObject* tuple = py.new_tuple(n);
  if (tuple == nullptr) return nullptr;
  for (Py_ssize_t i = 0; i < n; ++i) {
    py.incref(args[i]);
    py.set_tuple_item(tuple, i, args[i]);  // steals the reference
  }
  PyObject* result = py.call(fallback, tuple, nullptr);
  py.decref(tuple);
  return result;
}

std::vector<PyMethodDef*>& entries() {
  static std::vector<PyMethodDef*> all;
  return all;
}

}  // namespace fusedops::accel

// The C entry of `op`, replacing `fallback` (OpOverload._op, which it calls
// where it does not take the fast path); `fallback` itself where the
// accelerator has no entry for op; nullptr (no error set) where it cannot
// reach the interpreter. Called with the GIL held (ctypes.PyDLL), and returns a
// new reference, which ctypes (restype py_object) takes over.
extern "C" __attribute__((visibility("default"))) PyObject* fusedops_accel_entry(const char* op,
                                                                                 PyObject* fallback) {
  using namespace fusedops::accel;
  const Python* py = python();
  if (py == nullptr) return nullptr;
  for (PyMethodDef* def : entries()) {
    if (std::string_view(def->ml_name) == op) {
      if (PyObject* entry = py->new_function(def, fallback, nullptr)) return entry;
      py->clear_error();
      break;
    }
  }
  py->incref(fallback);
  return fallback;
}
