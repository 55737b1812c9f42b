#!/usr/bin/env bash
# The Linux aarch64 wheels (GH200, GB200: tools/wheel_matrix.json's aarch64
# platform, cpu and cu13), built and tested on an x86-64 machine without docker:
# cross-compiled (tools/aarch64/toolchain.cmake; nvcc with the aarch64 g++ as
# its host compiler) and run under qemu-user (an arm64 Debian root from
# tools/aarch64/arm64_root.sh, aarch64 torch from PyPI). The release builds the
# same wheels natively on arm64 runners; this is what can be proven here.
#
#   tools/aarch64/build_test.sh WORK OUT          OUT: the repaired wheels; WORK: state, reused
#   tools/aarch64/build_test.sh --fetch WORK       only the downloads (.ci/run: in the background)
#   tools/aarch64/build_test.sh --build WORK OUT   the downloads and the wheels, no tests
#   tools/aarch64/build_test.sh --test WORK OUT    the tests of the wheels --build left (.ci/run:
#                                                  it builds them beside the x86-64 wheels' tests)
#
# Env: AARCH64_CUDA_ARCHS: the cu13 wheel's archs here (default 9.0;10.0+PTX:
#      GH200 and GB200; the matrix's full list takes ~3x as long to compile).
#      AARCH64_ACCELERATORS: the torch releases whose accelerators these wheels
#      carry (default: those the tests below run under; "all": the matrix's).
# Needs root (apt-get, binfmt_misc), PyPI and Debian's mirrors. Used by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/../.."

mode=all
case ${1:-} in
  --fetch) mode=fetch; shift; set -- "${1:-}" "${1:-}/out" ;;
  --build | --test) mode=${1#--}; shift ;;
esac
[ $# -eq 2 ] && [ -n "$1" ] || { sed -n '2,19s/^# \{0,1\}//p' "$0" >&2; exit 2; }
mkdir -p "$1" "$2"
work=$(cd "$1" && pwd) out=$(cd "$2" && pwd) repo=$PWD
root=$work/arm64-root
archs=${AARCH64_CUDA_ARCHS:-9.0;10.0+PTX}
step() { printf '\n--- aarch64: %s  [%s, %ds]\n' "$*" "$(date +%T)" "$SECONDS"; }
matrix_env() { # VARIANT NAME: a value of the aarch64 (variant, platform)
  python3 tools/wheel_matrix.py --variant "$1" --platform aarch64 --format env | sed -n "s/^$2=//p"
}
guest() { # aarch64 Python under qemu; torch.compile's C++ step needs the cross g++ (tools/aarch64/cxx.sh)
  QEMU_LD_PREFIX=$root QEMU_CPU=neoverse-n1 CXX=$repo/tools/aarch64/cxx.sh "$root/usr/bin/python3.11" "$@"
}
pip_aarch64() { PIP_CONSTRAINT=/dev/null python3 tools/aarch64/pip_aarch64.py "$@" 2>&1 | { grep -v -e 'is ignored: it is neither' -e "as the 'root' user" || true; }; }

step "qemu-user, binfmt_misc and the aarch64 cross compiler (apt)"
if ! command -v qemu-aarch64-static >/dev/null || ! command -v aarch64-linux-gnu-g++ >/dev/null ||
  ! command -v update-binfmts >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user-static binfmt-support g++-aarch64-linux-gnu >/dev/null
fi
# The build runs aarch64 Python that runs cmake, which runs Python again: the
# kernel must hand aarch64 executables to qemu by itself.
mountpoint -q /proc/sys/fs/binfmt_misc || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
update-binfmts --enable qemu-aarch64
[ "$(head -1 /proc/sys/fs/binfmt_misc/qemu-aarch64)" = enabled ]
aarch64-linux-gnu-g++ --version | head -1

step "arm64 root (Debian 12's python3.11 and what it needs)"
tools/aarch64/arm64_root.sh "$root"

step "aarch64 torch from PyPI: $(matrix_env cpu TEST_TORCH_VERSIONS) (pip's markers as aarch64), and the build's tools"
# Native cmake and ninja: scikit-build-core under qemu runs the ones on PATH.
[ -x "$work/native/bin/cmake" ] || python3 -m venv "$work/native"
"$work/native/bin/pip" install -q "cmake>=3.30" ninja "nvidia-cuda-cuobjdump>=13.0,<14" 2>&1 | { grep -v 'is ignored' || true; }
mkdir -p "$work/native-bin"
ln -sf "$work/native/bin/cmake" "$work/native/bin/ninja" "$work/native-bin/"
for torch in $(matrix_env cpu TEST_TORCH_VERSIONS) $(matrix_env cu13 TEST_TORCH_VERSIONS); do
  [ -f "$work/torch-$torch/.done" ] && continue
  start=$SECONDS
  rm -rf "$work/torch-$torch"
  pip_aarch64 "$work/torch-$torch" "torch==$torch" pytest pytest-xdist numpy expecttest hypothesis
  touch "$work/torch-$torch/.done"
  echo "torch $torch for aarch64: $(du -sm "$work/torch-$torch" | cut -f1) MiB in $((SECONDS - start)) s"
done
[ -d "$work/build-tools/scikit_build_core" ] || pip_aarch64 "$work/build-tools" scikit-build-core
# pip itself, run by the aarch64 Python straight from its wheel (pip wheel).
[ -f "$work/pip/pip-25.3-py3-none-any.whl" ] ||
  python3 -m pip download -q --no-deps -d "$work/pip" pip==25.3 2>&1 | { grep -v 'is ignored' || true; }
if [ "$mode" = fetch ]; then step "downloads done"; exit 0; fi

wheel_of() { ls "$out"/fusedops-*+"$1"-*aarch64.whl; }
if [ "$mode" != test ]; then
  # The release builds every minor's natively (cibuildwheel); here, by default,
  # those of the torches the tests run under: each other minor is one more aarch64
  # torch download (~300 MB) for an accelerator the tests would not load, from the
  # source x86-64's are built and tested from under every minor.
  accelerators=${AARCH64_ACCELERATORS:-$(matrix_env cpu TEST_TORCH_VERSIONS) $(matrix_env cu13 TEST_TORCH_VERSIONS)}
  [ "$accelerators" = all ] && accelerators=$(python3 tools/wheel_matrix.py --accelerators)
  accelerators=$(tr ' ' '\n' <<< "$accelerators" | sort -uV | tr '\n' ' ')
  read -ra accelerators <<< "$accelerators"
  step "C++ autograd accelerators for torch ${accelerators[*]}, cross-built from each one's aarch64 torch wheel"
  rm -rf "$work/accel"
  PATH=$work/native-bin:$PATH PLATFORM=aarch64 WORK_DIR=$work/accel-work tools/build_accelerators.sh "$work/accel" \
    "${accelerators[@]}"

  build_wheel() { # VARIANT TORCH: cross-build under qemu, repair into $out
    local variant=$1 torch=$2 start=$SECONDS cuda=OFF wheel_archs=
    if [ "$variant" != cpu ]; then cuda=ON wheel_archs=$archs; fi
    rm -rf "$work/raw-$variant" "$work/build-$variant"
    (
      # shellcheck source=/dev/null
      if [ "$variant" != cpu ]; then source "$work/cuda-aarch64/env.sh"; fi
      PATH=$work/native-bin:$PATH PYTHONPATH=$work/torch-$torch:$work/build-tools \
        CMAKE_TOOLCHAIN_FILE=$repo/tools/aarch64/toolchain.cmake FUSEDOPS_CUDA=$cuda \
        FUSEDOPS_CUDA_ARCHS=$wheel_archs FUSEDOPS_ACCELERATORS=$work/accel \
        guest "$work/pip/pip-25.3-py3-none-any.whl/pip" wheel -q --no-deps --no-build-isolation \
        -w "$work/raw-$variant" --config-settings=build-dir="$work/build-$variant" . 2>&1 |
        { grep -v 'is ignored: it is neither' || true; }
    )
    echo "built the aarch64 $variant wheel against torch $torch (archs: ${wheel_archs:-none}) in $((SECONDS - start)) s"
    rm -f "$out"/fusedops-*+"$variant"-*aarch64.whl
    # auditwheel reads the aarch64 ELF files natively; the cross toolchain's
    # glibc (Debian 12: 2.36) decides the tag it can reach.
    REPAIR_PLAT=auto tools/repair_wheel.sh "$work/raw-$variant"/fusedops-*.whl "$out"
  }

  step "cpu wheel: FUSEDOPS_CUDA=OFF, against torch $(matrix_env cpu TORCH_VERSION) for aarch64"
  build_wheel cpu "$(matrix_env cpu TORCH_VERSION)"

  step "cu13 wheel: nvcc $(matrix_env cu13 CUDA_TOOLKIT_VERSION) (x86-64) with aarch64 CUDA libraries, archs $archs"
  CUDA_TARGET=aarch64 tools/install_cuda_toolkit.sh "$(matrix_env cu13 CUDA_TOOLKIT_VERSION)" "$work/cuda-aarch64" >/dev/null
  # PyPI's aarch64 torch 2.11.0 (the matrix's build torch, CUDA 13.0) is another
  # 5 GB download; the binary uses torch's stable ABI of 2.10 whatever it is built
  # against, so the 2.15.0 the tests need stands in (as .ci/run's 2.14.1 does).
  build_wheel cu13 "$(matrix_env cu13 TEST_TORCH_VERSIONS | cut -d' ' -f1)"

  step "wheel sizes, tags and the cu13 wheel's SASS (cuobjdump)"
  for wheel in "$out"/*aarch64.whl; do
    printf '%8d KiB  %s\n' "$(( $(stat -c %s "$wheel") / 1024 ))" "${wheel##*/}"
  done
  cuobjdump=$(find "$work/native" -name cuobjdump -type f | head -1)
  elf_dir=$(mktemp -d "$work/elf.XXXXXX")
  python3 -m zipfile -e "$(wheel_of cu13)" "$elf_dir"
  "$cuobjdump" --list-elf "$elf_dir"/fusedops/_C*.so | tee "$work/elf-cu13.txt"
  "$cuobjdump" --list-ptx "$elf_dir"/fusedops/_C*.so | tee -a "$work/elf-cu13.txt"
  rm -rf "$elf_dir"
  for arch in ${archs//;/ }; do
    sm=${arch%+PTX} sm=${sm//./}
    grep -q "sm_$sm\b" "$work/elf-cu13.txt" || { echo "aarch64: no sm_$sm code in the cu13 wheel" >&2; exit 1; }
  done
fi
if [ "$mode" = build ]; then step "wheels built: $(find "$out" -name "*aarch64.whl" -printf "%f ")"; exit 0; fi

# --- under qemu ------------------------------------------------------------------------
# The whole CPU suite takes ~16 min under qemu (2 min natively): what runs is
# what an aarch64 build can get wrong. The loader (platform rules, the wheel
# for this machine) and the registrations under every tested torch; under the
# newest, add on every dtype and layout (test_add.py), the C++ autograd
# accelerator's paths and torch.compile (its C++ step built by the cross g++)
# for every op, on its first sample (the other samples vary shapes and options of
# the same C++ source, checked on x86-64). The float64-reference sweeps of every op and
# dtype (test_every_op's 6000 cases) are not repeated: they test the same C++
# source as on x86-64; nor is opcheck, of the same Python registrations.
echo "aarch64: under qemu (~8x native time) run what an aarch64 build can get wrong: the loader and the"
echo "  registrations, and under torch $(matrix_env cpu TEST_TORCH_VERSIONS | tr ' ' '\n' | tail -1) add on every dtype and layout, every op's autograd and torch.compile"
echo "  (each op's first sample);"
echo "  not repeated: the float64 sweeps of every op and dtype (the same C++ source as x86-64's) and opcheck"
echo "  (the same Python registrations)"
failures=()
run_tests() { # VARIANT TORCH PYTEST_ARGS...: the wheel in its own folder, the tests under qemu
  local variant=$1 torch=$2 site=$work/site-$1 start=$SECONDS
  shift 2
  step "$variant wheel under torch $torch (qemu): info, pytest $*"
  # Unpacked, as pip --target would (pip_aarch64.py takes manylinux_2_28 tags only).
  rm -rf "$site"
  python3 -m zipfile -e "$(wheel_of "$variant")" "$site"
  if ! (cd "$work" && PYTHONPATH=$site:$work/torch-$torch guest -m fusedops info) | tee "$work/info.txt" ||
    ! grep -qE '^status +OK$' "$work/info.txt" || grep -qE '^  .{14} NO:' "$work/info.txt" ||
    ! grep -qE '^  platform       Linux aarch64 \(fusedops wheels here: cpu, cu13\)$' "$work/info.txt" ||
    ! grep -qE "^  autograd       C\+\+ autograd for torch ${torch%.*} " "$work/info.txt" ||
    { [ "$variant" != cpu ] && ! grep -qE "^install command  pip install \"fusedops==[^\"]*\+cu13\"" "$work/info.txt"; }; then
    failures+=("aarch64 $variant under torch $torch: python -m fusedops info")
    return
  fi
  # Two workers: qemu-user runs each guest process on one host core.
  (cd "$work" && PYTHONPATH=$site:$work/torch-$torch guest -m pytest -q -n 2 -p no:cacheprovider "$@") ||
    failures+=("aarch64 $variant under torch $torch: pytest $*")
  echo "aarch64 $variant under torch $torch: $((SECONDS - start)) s"
}
tests=$repo/tests
newest=$(matrix_env cpu TEST_TORCH_VERSIONS | tr ' ' '\n' | tail -1)
for torch in $(matrix_env cpu TEST_TORCH_VERSIONS); do
  if [ "$torch" = "$newest" ]; then
    run_tests cpu "$torch" "$tests/test_loader.py" "$tests/test_add.py" "$tests/test_registrations.py" \
      "$tests/test_every_op.py" --first-sample-only \
      -k "not test_forward_matches and not test_gradients_match and not test_gradcheck and not test_opcheck"
  else
    run_tests cpu "$torch" "$tests/test_loader.py" "$tests/test_registrations.py"
  fi
done
for torch in $(matrix_env cu13 TEST_TORCH_VERSIONS); do
  # Its loader decision (+cu13 under a CUDA torch) is what run_tests checks in info;
  # the loader tests ran under the cpu wheel (each of them starts torch again: ~20 s).
  # Without a GPU its CPU kernels are the cpu wheel's (same source, same cross g++):
  # what is its own is that every op has its CUDA kernels (test_registrations).
  run_tests cu13 "$torch" "$tests/test_registrations.py"
done

step "info on aarch64 under a CUDA 12 torch: no such wheel, and what to do"
# PyPI has no aarch64 CUDA 12 torch: the 2.15.0 one says CUDA 12.8 (sitecustomize,
# before fusedops is imported) under the cpu wheel, which runs there.
mkdir -p "$work/cuda12"
echo "import torch; torch.version.cuda = '12.8'" >"$work/cuda12/sitecustomize.py"
(cd "$work" && PYTHONPATH=$work/cuda12:$work/site-cpu:$work/torch-$newest guest -m fusedops info) |
  tee "$work/info-cu12.txt" || true
grep -qE '^needed variant   cu12 \(no such wheel exists for aarch64\)$' "$work/info-cu12.txt" &&
  grep -qE '^    pip install --upgrade "torch>=2.11" && pip install "fusedops==[^"]*\+cu13"' "$work/info-cu12.txt" ||
  failures+=("aarch64: info under a CUDA 12 torch does not say that no cu12 wheel exists and what to do")

if [ "${#failures[@]}" -gt 0 ]; then
  printf 'aarch64: FAILED: %s\n' "${failures[@]}" >&2
  exit 1
fi
step "aarch64 wheels built and tested: $(find "$out" -name "*aarch64.whl" -printf "%f ")"
