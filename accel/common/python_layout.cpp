// Proves at build time that python.h's PythonTensor is this torch minor's
// THPVariable (the tensor at the same place, of the same type): the entries
// read it without torch's Python headers, which need the full Python API. The
// only file that includes them: compiled (without the limited API) before the
// accelerator, never linked into it (accel/accelerator.cmake).
#define FUSEDOPS_PYTHON_LAYOUT_CHECK
#include <torch/csrc/autograd/python_variable.h>

#include <cstddef>
#include <type_traits>

#include "accel/common/python.h"

static_assert(std::is_same_v<decltype(THPVariable::cdata), at::Tensor>,
              "torch's THPVariable holds its tensor differently: update accel/common/python.h");
static_assert(offsetof(THPVariable, cdata) == offsetof(fusedops::accel::PythonTensor, tensor),
              "torch's THPVariable holds its tensor elsewhere: update accel/common/python.h");
