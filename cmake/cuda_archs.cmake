# One arch list, one source of gencode flags: FUSEDOPS_CUDA_ARCHS, else
# TORCH_CUDA_ARCH_LIST, else the list of the wheel variant of this nvcc's CUDA
# major for the target platform in tools/wheel_matrix.json
# (variants.cu<major>.platforms.<CMAKE_SYSTEM_PROCESSOR>.archs), the same list
# the published wheels are built with: SASS for each arch and PTX of the newest
# for forward compatibility. The list is turned into CMake's
# CUDA_ARCHITECTURES ("9.0" -> 90-real, "12.0+PTX" -> 120, i.e. SASS plus
# PTX); torch's own arch flags are never used.
function(fusedops_default_cuda_archs out)
  set(matrix_file "${PROJECT_SOURCE_DIR}/tools/wheel_matrix.json")
  if(NOT CMAKE_CUDA_COMPILER_VERSION MATCHES "^([0-9]+)\\.")
    message(FATAL_ERROR "fusedops: cannot read the CUDA major of nvcc '${CMAKE_CUDA_COMPILER_VERSION}'")
  endif()
  set(variant "cu${CMAKE_MATCH_1}")
  file(READ "${matrix_file}" matrix)
  string(JSON archs ERROR_VARIABLE error GET "${matrix}" variants ${variant} platforms ${CMAKE_SYSTEM_PROCESSOR} archs)
  if(error OR archs STREQUAL "" OR archs STREQUAL "NOTFOUND")
    string(JSON known ERROR_VARIABLE ignored GET "${matrix}" variants)
    message(FATAL_ERROR
      "fusedops: nvcc ${CMAKE_CUDA_COMPILER_VERSION} is CUDA ${CMAKE_MATCH_1}, and ${matrix_file} "
      "has no arch list for a '${variant}' variant on ${CMAKE_SYSTEM_PROCESSOR} (${error}). Set FUSEDOPS_CUDA_ARCHS "
      "(e.g. -DFUSEDOPS_CUDA_ARCHS=9.0 or the environment variable), or add the variant there.")
  endif()
  message(STATUS "fusedops: default CUDA archs of the ${variant} variant on ${CMAKE_SYSTEM_PROCESSOR} (tools/wheel_matrix.json)")
  set(${out} "${archs}" PARENT_SCOPE)
endfunction()

function(fusedops_cuda_architectures out_architectures out_list)
  set(archs "${FUSEDOPS_CUDA_ARCHS}")
  if(NOT archs)
    set(archs "$ENV{TORCH_CUDA_ARCH_LIST}")
  endif()
  if(NOT archs)
    fusedops_default_cuda_archs(archs)
  endif()
  string(REPLACE " " ";" archs "${archs}")
  set(result "")
  foreach(arch IN LISTS archs)
    if(arch STREQUAL "")
      continue()
    endif()
    if(NOT arch MATCHES "^([0-9]+)\\.([0-9]+)([af]?)(\\+PTX)?$")
      message(FATAL_ERROR "fusedops: bad CUDA arch '${arch}' in '${archs}'; expected e.g. 9.0 or 12.0+PTX")
    endif()
    set(number "${CMAKE_MATCH_1}${CMAKE_MATCH_2}${CMAKE_MATCH_3}")
    if(CMAKE_MATCH_4)
      list(APPEND result "${number}")
    else()
      list(APPEND result "${number}-real")
    endif()
  endforeach()
  if(NOT result)
    message(FATAL_ERROR "fusedops: the CUDA arch list is empty")
  endif()
  message(STATUS "fusedops: CUDA archs ${archs} -> ${result}")
  set(${out_architectures} "${result}" PARENT_SCOPE)
  set(${out_list} "${archs}" PARENT_SCOPE)
endfunction()
