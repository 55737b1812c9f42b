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
#   tools/build_accelerators.sh --resolve [TORCH_VERSION ...]   # only which torch wheel each
#       would download (pip, from metadata: nothing is downloaded; .ci/run's release dry run)
#
# Each torch wheel is the one for the first Python of the matrix's "pythons",
# from the running one ($PYTHON, default python3) on, that the release has a
# wheel for: cibuildwheel's before-build runs cp310, and torch 2.15 has no cp310
# wheel. Any one serves: the accelerator uses torch's C++ headers and libraries
# (the same in each Python's wheel of a release) and the limited API of the
# running Python (accel/common/python.h), and is loaded under every Python >= 3.10.
#
# Needs cmake >= 3.30, ninja, a C++20 g++ and PyPI (pip download of the torch
# wheels, kept in WORK_DIR, default a temporary folder).
set -euo pipefail
cd "$(dirname "$0")/.."

resolve_only=false
if [ "${1:-}" = --resolve ]; then resolve_only=true; shift; else
  out=${1:?usage: tools/build_accelerators.sh OUT_DIR|--resolve [TORCH_VERSION ...]}
  shift
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
fi
python=${PYTHON:-python3}
# Assigned first: a failing command substitution in `read <<<` would go unnoticed.
matrix_torches=$("$python" tools/wheel_matrix.py --accelerators)
pythons=$("$python" tools/wheel_matrix.py --pythons)
if [ $# -gt 0 ]; then versions=("$@"); else read -ra versions <<< "$matrix_torches"; fi
work=${WORK_DIR:-$(mktemp -d)}
running=$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
# The limited API's types only (accel/common/python.h): any Python >= 3.10 serves.
python_include=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
target=${PLATFORM:-$(uname -m)}
platform=$("$python" -c 'import json; print(json.load(open("tools/wheel_matrix.json"))["manylinux"])')_$target
cross=()
if [ "$target" != "$(uname -m)" ]; then
  [ "$target" = aarch64 ] || { echo "build_accelerators: PLATFORM=$target: only aarch64 is cross-built" >&2; exit 1; }
  cross=(-DCMAKE_TOOLCHAIN_FILE="$PWD/tools/aarch64/toolchain.cmake")
fi

# torch's own wheel (--no-deps: its headers and three libraries are used) of
# VERSION for $platform, for the first Python of $pythons from the running one on
# that has one: downloaded into DIR, or only resolved (pip install --dry-run reads
# PyPI's metadata, downloads nothing; it checks Requires-Python against the
# interpreter that runs it even with --python-version, so the wheel tags decide
# there). Prints that Python. PIP_CONSTRAINT=/dev/null: any cap on torch this
# machine sets does not apply.
torch_wheel() { # VERSION download DIR | VERSION resolve
  local py log args
  for py in $pythons; do
    [ "${py#3.}" -ge "${running#3.}" ] || continue
    if [ "$2" = download ]; then args=(download -d "$3"); else
      args=(install --dry-run --ignore-installed --ignore-requires-python --target "$work/resolve"
        --report "$work/resolve.json")
    fi
    if log=$(PIP_CONSTRAINT=/dev/null "$python" -m pip "${args[@]}" -q --no-deps --only-binary=:all: \
      --python-version "$py" --platform "$platform" "torch==$1" 2>&1); then
      echo "$py"
      return
    fi
    grep -q "No matching distribution found for torch==$1" <<< "$log" ||
      { grep -v 'is ignored: it is neither a file nor a directory' <<< "$log" >&2; return 1; }
  done
  echo "build_accelerators: no torch $1 wheel for $platform for any Python of $pythons from $running on" >&2
  return 1
}

if $resolve_only; then
  for version in "${versions[@]}"; do
    py=$(torch_wheel "$version" resolve)
    echo "build_accelerators: torch $version for $platform under Python $running: the Python $py wheel," \
      "$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["install"][0]["download_info"]["url"].rsplit("/", 1)[-1])' "$work/resolve.json")"
  done
  exit 0
fi

for version in "${versions[@]}"; do
  start=$SECONDS
  files="$work/torch-$version-$target"
  if [ ! -f "$files/lib/libtorch_python.so" ]; then
    py=$(torch_wheel "$version" download "$work/wheels-$version")
    echo "build_accelerators: torch $version's wheel for Python $py" >&2
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
