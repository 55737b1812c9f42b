# fusedops_accelerator(TORCH_VERSION TORCH_ROOT PYTHON_INCLUDE): the C++
# autograd and the C entries of accel/ built against one torch's full C++ API
# (TORCH_ROOT/include) as torch_<major>_<minor>.so, loaded only under that torch
# minor. It links only libc10, libtorch_cpu and libtorch_python (no CUDA: one
# build serves the cpu, cu12 and cu13 wheels), and --no-undefined proves that
# minor's libraries have every symbol it uses. Python's headers
# (PYTHON_INCLUDE) are used for the limited API's types only, no symbol of the
# interpreter is linked (accel/common/python.h): one build serves every Python.
# Sets FUSEDOPS_ACCELERATOR_TARGET in the caller's scope.
set(FUSEDOPS_ACCEL_DIR "${CMAKE_CURRENT_LIST_DIR}")

function(fusedops_accelerator torch_version torch_root python_include)
  if(NOT torch_version MATCHES "^([0-9]+)\\.([0-9]+)")
    message(FATAL_ERROR "fusedops: cannot read a torch minor from '${torch_version}'")
  endif()
  set(target "torch_${CMAKE_MATCH_1}_${CMAKE_MATCH_2}")
  file(GLOB sources CONFIGURE_DEPENDS "${FUSEDOPS_ACCEL_DIR}/*/*.cpp")
  set(layout_check "${FUSEDOPS_ACCEL_DIR}/common/python_layout.cpp")
  list(REMOVE_ITEM sources "${layout_check}")
  add_library(${target} MODULE ${sources})
  # torch's Python headers need the full Python API (and pybind11 emits code
  # that calls it): their one user, a build-time check of a layout, is compiled
  # before the library and never linked.
  add_library(${target}_python_layout OBJECT "${layout_check}")
  add_dependencies(${target} ${target}_python_layout)
  foreach(t ${target} ${target}_python_layout)
    target_compile_features(${t} PRIVATE cxx_std_20)
    target_include_directories(${t} PRIVATE "${FUSEDOPS_ACCEL_DIR}/..")
    target_include_directories(${t} SYSTEM PRIVATE "${torch_root}/include"
                               "${torch_root}/include/torch/csrc/api/include" "${python_include}")
    # Every torch >= 2.10 wheel is built with the C++11 string ABI.
    target_compile_definitions(${t} PRIVATE _GLIBCXX_USE_CXX11_ABI=1)
    target_compile_options(${t} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  endforeach()
  # One translation unit: torch's headers are parsed once, not once a file.
  # No RPATH: libc10 and libtorch_cpu are found among the libraries `import
  # torch` has loaded, as the stable library's are.
  set_target_properties(${target} PROPERTIES PREFIX "" CXX_VISIBILITY_PRESET hidden UNITY_BUILD ON
                        UNITY_BUILD_BATCH_SIZE 0 SKIP_BUILD_RPATH ON)
  target_link_libraries(${target} PRIVATE "${torch_root}/lib/libc10.so" "${torch_root}/lib/libtorch_cpu.so"
                        "${torch_root}/lib/libtorch_python.so" ${CMAKE_DL_LIBS})
  target_link_options(${target} PRIVATE -Wl,--no-undefined)
  set(FUSEDOPS_ACCELERATOR_TARGET ${target} PARENT_SCOPE)
endfunction()
