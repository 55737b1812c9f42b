# Cross-compiling fusedops (and accel/) for Linux aarch64 on an x86-64 machine:
# Debian's aarch64-linux-gnu-g++ (glibc 2.36 headers and libraries), nvcc
# (x86-64) with that g++ as its host compiler. cmake and ninja run natively;
# Python and torch (the build's own Python steps) run as aarch64 code under qemu
# (tools/aarch64/env.sh).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_CUDA_HOST_COMPILER aarch64-linux-gnu-g++)
# torch, Python and the CUDA libraries are found by explicit paths (torch_info.py,
# cuda_probe.py), never by searching the host's /usr.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
