// The extension module whose import loads this library (and so runs the
// STABLE_TORCH_LIBRARY registrations). It uses only the limited Python API,
// which is what lets one cp310-abi3 wheel serve every Python >= 3.10.
#include <Python.h>

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

PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&fusedops_module); }
