// The extension module whose import loads this library (and so runs the
// TORCH_LIBRARY registrations). It uses only the stable Python ABI, which is
// what lets one cp310-abi3 wheel serve every Python >= 3.10.
#include <Python.h>

#include <ATen/Parallel.h>  // defines INTRA_OP_PARALLEL where at::parallel_for uses threads

static PyModuleDef fusedops_module = {
    PyModuleDef_HEAD_INIT,
    "_C",
    "fusedops operator library; the operators live in torch.ops.fusedops",
    -1,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
};

// intra_op_parallel: whether the CPU kernels' at::parallel_for runs on torch's
// intra-op threads (1) or on the calling thread alone (0).
PyMODINIT_FUNC PyInit__C(void) {
  PyObject* module = PyModule_Create(&fusedops_module);
#ifdef INTRA_OP_PARALLEL
  constexpr long kIntraOpParallel = 1;
#else
  constexpr long kIntraOpParallel = 0;
#endif
  if (module != nullptr && PyModule_AddIntConstant(module, "intra_op_parallel", kIntraOpParallel) != 0) {
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
