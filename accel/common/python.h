// The public functions' C entries: one Python callable per op that takes the
// op's arguments as the public function passes them (positional, as in its
// schema), calls the op through its typed dispatcher handle with the GIL
// released, and wraps the result. It replaces OpOverload._op, whose generic
// argument parsing and boxed call cost about a fifth of a small no-grad call.
//
// One accelerator serves every Python >= 3.10 of its torch minor, so this uses
// only the limited API's types, and calls the interpreter through pointers
// looked up when the loader asks for an entry (python.cpp): no Python symbol is
// linked, and --no-undefined still proves every torch symbol. From
// libtorch_python (loaded by `import torch`) it uses four exported symbols,
// declared below since torch's Python headers need the full API; and the
// layout of torch's Python tensor object, checked against torch's own
// definition at build time (python_layout.cpp).
//
// An entry takes the fast path only where the op's own Python call would do
// nothing more: every tensor argument a plain torch.Tensor or nn.Parameter (no
// __torch_function__), no torch-function mode active, each other argument of
// the type its schema names. Anything else goes to the callable it replaces,
// unchanged.
#pragma once

#if defined(Py_PYTHON_H) && !defined(Py_LIMITED_API) && !defined(FUSEDOPS_PYTHON_LAYOUT_CHECK)
#error "accel/common/python.h: Python.h was included before it, with the full API"
#endif
#define PY_SSIZE_T_CLEAN
#define Py_LIMITED_API 0x030A0000
#include <Python.h>

#include <exception>
#include <tuple>
#include <type_traits>

#include <ATen/PythonTorchFunctionTLS.h>
#include <torch/csrc/Export.h>

#include "accel/common/accel.h"

TORCH_PYTHON_API extern PyObject* THPVariableClass;
TORCH_PYTHON_API extern PyObject* ParameterClass;
TORCH_PYTHON_API PyObject* THPVariable_Wrap(at::TensorBase&& var);
namespace torch {
TORCH_PYTHON_API void translate_exception_to_python(const std::exception_ptr&);
}  // namespace torch

namespace fusedops::accel {

// torch's THPVariable: a Python object whose payload is the tensor.
struct PythonTensor {
  PyObject_HEAD at::Tensor tensor;
};

// The interpreter's functions and objects the entries use (stable ABI).
struct Python {
  PyThreadState* (*save_thread)();
  void (*restore_thread)(PyThreadState*);
  PyObject* (*new_function)(PyMethodDef*, PyObject*, PyObject*);
  PyObject* (*call)(PyObject*, PyObject*, PyObject*);
  PyObject* (*new_tuple)(Py_ssize_t);
  int (*set_tuple_item)(PyObject*, Py_ssize_t, PyObject*);
  void (*incref)(PyObject*);
  void (*decref)(PyObject*);
  double (*float_value)(PyObject*);
  double (*int_value)(PyObject*);
  const char* (*utf8)(PyObject*, Py_ssize_t*);
  PyObject* (*error_occurred)();
  void (*clear_error)();
  PyObject *none, *true_, *false_;
  PyTypeObject *float_type, *int_type, *str_type;
};

// Resolved once; nullptr where this process's interpreter does not export them.
const Python* python();

inline bool plain_tensor(PyObject* o) {
  return Py_TYPE(o) == reinterpret_cast<PyTypeObject*>(THPVariableClass) ||
         Py_TYPE(o) == reinterpret_cast<PyTypeObject*>(ParameterClass);
}

// A new reference to a plain tensor's payload.
inline Tensor tensor_of(PyObject* o) { return reinterpret_cast<PythonTensor*>(o)->tensor; }

// Whether every argument in `args` is a plain tensor and no torch-function
// mode would see the call.
inline bool plain_tensors(std::initializer_list<PyObject*> args) {
  if (at::impl::torch_function_mode_enabled()) return false;
  for (PyObject* o : args) {
    if (!plain_tensor(o)) return false;
  }
  return true;
}

// The schema's optional arguments from None or their plain Python type; false
// (not converted) for anything else.
bool optional_tensor(PyObject* o, OptTensor& out);
bool optional_string(PyObject* o, std::optional<c10::string_view>& out);
bool number(PyObject* o, double& out);
// A Python int that a double holds exactly (|v| <= 2^53): what an `int`
// argument such as ignore_index takes; false for anything else.
bool integer(PyObject* o, int64_t& out);
bool optional_number(PyObject* o, std::optional<double>& out);
bool boolean(PyObject* o, bool& out);

// The callable an entry replaces, called with the entry's arguments.
PyObject* call_fallback(PyObject* fallback, PyObject* const* args, Py_ssize_t n);

// An op's result as Python sees it: a tensor, or a tuple of tensors for an op
// of several outputs. nullptr with a Python error set where it fails.
inline PyObject* wrap(Tensor&& t) { return THPVariable_Wrap(std::move(t)); }

template <typename... Ts>
PyObject* wrap(std::tuple<Ts...>&& ts) {
  const Python& py = *python();
  PyObject* tuple = py.new_tuple(sizeof...(Ts));
  if (tuple == nullptr) return nullptr;
  Py_ssize_t i = 0;
  const auto put = [&](PyObject* item) {
    return item != nullptr && py.set_tuple_item(tuple, i++, item) == 0;
  };
  bool ok = true;
  std::apply([&](auto&... t) { ((ok = ok && put(wrap(std::move(t)))), ...); }, ts);  // set_tuple_item steals
  if (ok) return tuple;
  py.decref(tuple);
  return nullptr;
}

// Runs `op` (a call of a fusedops op) with the GIL released; its result
// (wrap), or a Python exception as torch raises it (torch.OutOfMemoryError
// for a CUDA out of memory). `op` holds its own references to the tensors
// (taken with the GIL held: another thread may swap a Python tensor's payload
// meanwhile) and looks up its op handle itself, so that every C++ exception
// lands here.
template <typename F>
PyObject* run_op(F&& op) {
  const Python& py = *python();
  std::exception_ptr error;
  std::decay_t<decltype(op())> out;
  PyThreadState* state = py.save_thread();
  try {
    out = with_torch_errors(std::forward<F>(op));
  } catch (...) {
    error = std::current_exception();
  }
  py.restore_thread(state);
  if (!error) {
    try {
      return wrap(std::move(out));
    } catch (...) {
      error = std::current_exception();
    }
  }
  torch::translate_exception_to_python(error);
  return nullptr;
}

// Each op file defines its entry by one FUSEDOPS_ACCEL_ENTRY(name, fn): fn(fallback,
// args, nargs) is a METH_FASTCALL function whose self is the callable it replaces.
using EntryFunction = PyObject* (*)(PyObject*, PyObject* const*, Py_ssize_t);
std::vector<PyMethodDef*>& entries();
struct RegisterEntry {
  RegisterEntry(PyMethodDef* def) { entries().push_back(def); }
};
#define FUSEDOPS_ACCEL_ENTRY(name, fn)                                                                    \
  static PyMethodDef fusedops_entry_def_##name{                                                           \
      #name, reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(static_cast<EntryFunction>(fn))), \
      METH_FASTCALL, nullptr};                                                                            \
  static const ::fusedops::accel::RegisterEntry fusedops_entry_##name(&fusedops_entry_def_##name)

}  // namespace fusedops::accel
