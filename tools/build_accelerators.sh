#!/usr/bin/env bash
# Builds the C++ autograd accelerators (accel/), one per torch minor of
# tools/wheel_matrix.json's "accelerators", each against that release's own
# headers and libraries, into OUT_DIR as torch_<major>_<minor>.so. A wheel build
# takes the folder with FUSEDOPS_ACCELERATORS=OUT_DIR (one set serves the cpu,
# cu12 and cu13 wheels: the accelerators hold no CUDA code).
#
#   tools/build_accelerators.sh OUT_DIR [TORCH_VERSION ...]     # default: the matrix's
#   PLATFORM=aarch64 tools/build_accelerators.sh OUT_DIR ...    # cross-built for Linux aarch64
#       from the aarch64 torch wheels, with tools/aarch64/toolchain.cmake
#
# Needs cmake >= 3.30, ninja, a C++20 g++ and PyPI (pip download of the torch
# wheels, kept in WORK_DIR, default a temporary folder).
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:?usage: tools/build_accelerators.sh OUT_DIR [TORCH_VERSION ...]}
shift
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ $# -gt 0 ]; then versions=("$@"); else read -ra versions <<< "$(python3 tools/wheel_matrix.py --accelerators)"; fi
work=${WORK_DIR:-$(mktemp -d)}
python=${PYTHON:-python3}
py_tag=$("$python" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
# The limited API's types only (accel/common/python.h): any Python >= 3.10 serves.
python_include=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
target=${PLATFORM:-$(uname -m)}
platform=manylinux_2_28_$target
cross=()
if [ "$target" != "$(uname -m)" ]; then
  [ "$target" = aarch64 ] || { echo "build_accelerators: PLATFORM=$target: only aarch64 is cross-built" >&2; exit 1; }
  cross=(-DCMAKE_TOOLCHAIN_FILE="$PWD/tools/aarch64/toolchain.cmake")
fi

for version in "${versions[@]}"; do
  start=$SECONDS
  files="$work/torch-$version-$target"
  if [ ! -f "$files/lib/libtorch_python.so" ]; then
    # --no-deps: only torch's own wheel (its headers and three libraries are used);
    # PIP_CONSTRAINT=/dev/null: any cap on torch this machine sets does not apply.
    PIP_CONSTRAINT=/dev/null "$python" -m pip download -q --no-deps --only-binary=:all: --python-version "$py_tag" \
      --platform "$platform" -d "$work/wheels-$version" "torch==$version" 2>&1 |
      { grep -v 'is ignored: it is neither a file nor a directory' || true; }
    wheel=$(find "$work/wheels-$version" -name "torch-$version*.whl" | head -1)
    [ -n "$wheel" ] || { echo "build_accelerators: no torch $version wheel for $platform" >&2; exit 1; }
    "$python" tools/torch_files.py "$wheel" "$files"
    rm -rf "$work/wheels-$version"
  fi
  # No RPATH: like fusedops._C, it finds torch's libraries among those `import
  # torch` loaded; a build-tree RPATH would point into WORK_DIR (repair_wheel.sh refuses it).
  cmake -S accel -B "$work/build-$version-$target" -G Ninja -DFUSEDOPS_TORCH_VERSION="$version" \
    -DFUSEDOPS_TORCH_ROOT="$files" -DFUSEDOPS_PYTHON_INCLUDE="$python_include" -DCMAKE_SKIP_BUILD_RPATH=ON \
    "${cross[@]}" >/dev/null
  cmake --build "$work/build-$version-$target"
  library=$(find "$work/build-$version-$target" -maxdepth 1 -name 'torch_*_*.so')
  # What it may link: torch's CPU and Python libraries and the C/C++ runtime, never
  # CUDA (nor libpython: the interpreter's functions are looked up at run time).
  needed=$(readelf -d "$library" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')
  for lib in $needed; do
    case $lib in
      libc10.so | libtorch_cpu.so | libtorch_python.so | libstdc++.so.* | libgcc_s.so.* | libc.so.* | libm.so.* | \
        libdl.so.* | ld-linux-*.so.*) ;;
      *) echo "build_accelerators: $(basename "$library") links $lib" \
           "(allowed: libc10, libtorch_cpu, libtorch_python, the C/C++ runtime)" >&2
         exit 1 ;;
    esac
  done
  cp "$library" "$out/"
  printf 'build_accelerators: %s for torch %s: %d KiB, %d s (links %s)\n' "$(basename "$library")" "$version" \
    "$(( $(stat -c %s "$library") / 1024 ))" $((SECONDS - start)) "$needed"
done
