# Our own sm_90a GEMMs (cuda/<op>/sm90/: linear's, and linear_cross_entropy's
# slab gradient on linear's mainloop), built on CUTLASS's headers where
# they are found: FUSEDOPS_CUTLASS_DIR (cache variable or environment; a folder
# with cutlass/ and cute/), else third_party/cutlass/include, where
# tools/get_cutlass.py puts the pinned release. FUSEDOPS_CUTLASS (environment):
# AUTO (default) builds it when the headers are there and otherwise says in the
# CUDA reason line (build_info()) that linear is cuBLASLt-only; ON fails
# without them (or with nvcc older than 13); OFF leaves it out. Included from CMakeLists.txt's CUDA block,
# after the _C target.
#
# The kernels are compiled for sm_90a alone, whatever the arch list: wgmma and
# setmaxnreg exist only there, and the glue takes this path only on devices of
# compute capability 9.0.
set(FUSEDOPS_CUTLASS_DIR "$ENV{FUSEDOPS_CUTLASS_DIR}" CACHE PATH "CUTLASS include folder (cutlass/, cute/)")
set(fusedops_cutlass_mode "$ENV{FUSEDOPS_CUTLASS}")
# (STREQUAL: `if(NOT var)` would take OFF, a false constant, for unset)
if(fusedops_cutlass_mode STREQUAL "")
  set(fusedops_cutlass_mode AUTO)
endif()
string(TOUPPER "${fusedops_cutlass_mode}" fusedops_cutlass_mode)
if(NOT fusedops_cutlass_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "fusedops: FUSEDOPS_CUTLASS must be AUTO, ON or OFF, not '${fusedops_cutlass_mode}'")
endif()
if(NOT FUSEDOPS_CUTLASS_DIR)
  set(FUSEDOPS_CUTLASS_DIR "${PROJECT_SOURCE_DIR}/third_party/cutlass/include")
endif()

set(fusedops_cutlass_header "${FUSEDOPS_CUTLASS_DIR}/cutlass/gemm/kernel/sm90_gemm_tma_warpspecialized_pingpong.hpp")
if(fusedops_cutlass_mode STREQUAL "OFF")
  set(fusedops_cutlass_why "FUSEDOPS_CUTLASS=OFF")
elseif(CMAKE_CUDA_COMPILER_VERSION VERSION_LESS 13.0)
  # Built and tested with nvcc 13.0 only; the cu12 wheel (CUDA 12.4) stays cuBLASLt-only.
  set(fusedops_cutlass_why "nvcc ${CMAKE_CUDA_COMPILER_VERSION} (it is built with CUDA 13 only)")
elseif(NOT EXISTS "${fusedops_cutlass_header}" OR NOT EXISTS "${FUSEDOPS_CUTLASS_DIR}/cute/tensor.hpp")
  set(fusedops_cutlass_why "no CUTLASS headers in ${FUSEDOPS_CUTLASS_DIR} (python3 tools/get_cutlass.py fetches them)")
endif()
if(fusedops_cutlass_why AND fusedops_cutlass_mode STREQUAL "ON")
  message(FATAL_ERROR "fusedops: FUSEDOPS_CUTLASS=ON, but ${fusedops_cutlass_why}")
endif()

if(fusedops_cutlass_why)
  string(APPEND FUSEDOPS_CUDA_REASON "; linear on sm_90: cuBLASLt + a pass, ${fusedops_cutlass_why}")
  message(STATUS "fusedops: linear's sm_90a GEMM not built: ${fusedops_cutlass_why}")
else()
  file(GLOB FUSEDOPS_SM90_SOURCES CONFIGURE_DEPENDS cuda/*/sm90/*.cu)
  add_library(fusedops_sm90 STATIC ${FUSEDOPS_SM90_SOURCES})
  target_include_directories(fusedops_sm90 PRIVATE "${PROJECT_SOURCE_DIR}")
  target_include_directories(fusedops_sm90 SYSTEM PRIVATE "${FUSEDOPS_CUTLASS_DIR}")
  set_target_properties(fusedops_sm90 PROPERTIES
    CUDA_ARCHITECTURES 90a-real
    CUDA_STANDARD 17
    CUDA_RUNTIME_LIBRARY Shared)
  target_compile_options(fusedops_sm90 PRIVATE --expt-relaxed-constexpr)
  if(FUSEDOPS_CUDA_LINEINFO)
    target_compile_options(fusedops_sm90 PRIVATE -lineinfo)
  endif()
  target_compile_definitions(fusedops_sm90 PRIVATE NDEBUG)
  target_link_libraries(_C PRIVATE fusedops_sm90)
  target_compile_definitions(_C PRIVATE FUSEDOPS_WITH_CUTLASS)
  string(APPEND FUSEDOPS_CUDA_REASON "; linear on sm_90: our sm_90a GEMM built (CUTLASS headers ${FUSEDOPS_CUTLASS_DIR}) for the erf GELU and clamps, off with FUSEDOPS_LINEAR_SM90=0; linear_cross_entropy's vocab slabs from it, off with FUSEDOPS_LCE_SLAB_GEMM=0")
  message(STATUS "fusedops: linear's sm_90a GEMM built with the CUTLASS headers in ${FUSEDOPS_CUTLASS_DIR}")
endif()
