#!/usr/bin/env bash
# Makes (or updates) a virtual environment with torch, the build tools and the
# test tools, then builds fusedops from this checkout and installs it there.
#
#   tools/setup.sh                      # .venv with the newest torch pip offers
#   VENV=/tmp/v TORCH_SPEC=torch==2.13.0 FUSEDOPS_CUDA=OFF tools/setup.sh
#
# FUSEDOPS_CUDA (AUTO|ON|OFF) and FUSEDOPS_CUDA_ARCHS (e.g. "9.0") pass through
# to the build; BUILD_DIR keeps one incremental build tree per torch; the wheel
# lands in WHEEL_DIR (default dist/) and is what gets installed.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=${VENV:-.venv}
python=${PYTHON:-python3}
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' || {
  echo "setup: fusedops needs Python 3.10 or newer ($python is $("$python" --version))" >&2; exit 1; }

[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
echo "setup: installing ${TORCH_SPEC:-torch} and the build tools into $venv"
"$venv/bin/python" -m pip install -q "${TORCH_SPEC:-torch}" scikit-build-core "cmake>=3.30" ninja \
  pytest numpy expecttest hypothesis

# fusedops.patch's model libraries (tools/requirements/models.txt), for its tests and
# `bench --model`; torch stays the version installed above (torchvision follows it).
torch_version=$("$venv/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])')
"$venv/bin/python" -m pip install -q -r tools/requirements/models.txt "torch==$torch_version"

# linear's sm_90a GEMM needs CUTLASS's headers (third_party/, pinned and
# hash-checked); without them a CUDA build is cuBLASLt-only and says so.
if [ "${FUSEDOPS_CUDA:-AUTO}" != OFF ] && [ "${FUSEDOPS_CUTLASS:-AUTO}" != OFF ] && [ -z "${FUSEDOPS_CUTLASS_DIR:-}" ] &&
  [ ! -d third_party/cutlass/include/cute ]; then
  "$venv/bin/python" tools/get_cutlass.py || echo "setup: no CUTLASS headers: linear on sm_90 stays on cuBLASLt + a pass"
fi

echo "setup: building fusedops (FUSEDOPS_CUDA=${FUSEDOPS_CUDA:-AUTO})"
build_dir=${BUILD_DIR:-build/$("$venv/bin/python" -c 'import torch; print(torch.__version__)')}
fresh=$(mktemp -d)
trap 'rm -rf "$fresh"' EXIT
"$venv/bin/python" -m pip wheel -q --no-build-isolation --no-deps -w "$fresh" \
  --config-settings=build-dir="$build_dir" .
built=("$fresh"/fusedops-*.whl)
wheel_dir=${WHEEL_DIR:-dist}
mkdir -p "$wheel_dir"
mv "${built[0]}" "$wheel_dir/"
"$venv/bin/python" -m pip install -q --no-deps --force-reinstall "$wheel_dir/$(basename "${built[0]}")"
"$venv/bin/python" -c 'import fusedops; print("setup: installed fusedops", fusedops.__version__)'
