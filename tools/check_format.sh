#!/usr/bin/env bash
# The C++ and CUDA sources are formatted as .clang-format says (clang-format
# from PyPI, version pinned by the caller): lists what is not and fails.
# Run by .ci/run; `clang-format -i $(git ls-files 'cpp/*' 'cuda/*' 'accel/*.cpp' 'accel/*.h')` fixes it.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t sources < <(git ls-files 'cpp/*' 'cuda/*' 'accel/*.cpp' 'accel/*.h' 'benchmarks/kernels/*')
clang-format --dry-run --Werror "${sources[@]}"
echo "clang-format: ${#sources[@]} files formatted"
