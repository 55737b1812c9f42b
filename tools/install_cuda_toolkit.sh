#!/usr/bin/env bash
# Install a pinned CUDA toolkit from NVIDIA's pip wheels into PREFIX and make
# it look like a regular toolkit root for nvcc and CMake.
#
#   tools/install_cuda_toolkit.sh CUDA_VERSION PREFIX
#   e.g. tools/install_cuda_toolkit.sh 13.0 /opt/fusedops-cuda-13.0
#
# CUDA_VERSION is MAJOR.MINOR (mapped to an exact cuda-toolkit release below)
# or an exact cuda-toolkit release such as 13.0.3.0.
# Env: PYTHON = interpreter for the venv (default: python3, else manylinux's
#      /opt/python/cp312-cp312/bin/python); CUDAHOSTCXX = host compiler for
#      the post-install nvcc smoke test (default: nvcc's, i.e. gcc).
#
# Result:
#   PREFIX/                    venv that owns the wheels (pip uninstall works)
#   PREFIX/cuda -> lib/python3.X/site-packages/nvidia/cuMAJOR   (toolkit root)
#   PREFIX/env.sh              `source` it: CUDA_HOME, CUDACXX, PATH, ...
# The toolkit root is printed as the last line of stdout; all logs go to stderr.
#
# Used by .ci/run and by cibuildwheel's before-all (manylinux_2_28), so keep it
# distro-neutral: bash, coreutils and a Python >= 3.9 only.
set -euo pipefail

log() { printf '[install_cuda_toolkit] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
    sed -n '2,19s/^# \{0,1\}//p' "$0" >&2
    exit 2
}

[[ $# -eq 2 ]] || usage
cuda_version=$1
prefix_arg=$2

[[ $cuda_version =~ ^[0-9]+\.[0-9]+(\.[0-9]+)*$ ]] ||
    die "CUDA_VERSION must look like 13.0 or 13.0.3.0, got '$cuda_version'"
cuda_major=${cuda_version%%.*}
cuda_minor=${cuda_version#*.}
cuda_minor=${cuda_minor%%.*}
# CUDA 12 wheels use a per-component layout (nvidia/cuda_nvcc, ...); only the
# merged nvidia/cuXX layout of CUDA >= 13 is handled here.
((cuda_major >= 13)) || die "CUDA >= 13 required (pip wheels before 13 use another layout)"

# Exact cuda-toolkit release per MAJOR.MINOR: `==13.0.*` alone would silently
# move when NVIDIA publishes a new patch release. The extras pin every
# component (13.0.3.0 -> nvcc/crt/nvvm 13.0.88, cudart 13.0.96, cccl 13.0.85,
# cublas 13.1.1.3 = the cuBLAS torch 2.14.1 uses, nvrtc 13.0.88).
case $cuda_version in
    13.0) toolkit_version=13.0.3.0 ;;
    *.*.*) toolkit_version=$cuda_version ;;
    *)
        toolkit_version="$cuda_version.*"
        log "warning: no exact pin known for CUDA $cuda_version; using cuda-toolkit==$toolkit_version"
        ;;
esac
# nvcc itself needs nvvm (cicc, libdevice), crt headers and cudart; cccl gives
# cub/thrust/libcu++; cublas gives cuBLAS + cuBLASLt (and pulls nvrtc).
requirement="cuda-toolkit[nvcc,cudart,cccl,crt,cublas]==$toolkit_version"

# Spaces or quotes in the path would have to survive nvcc, CMake and env.sh.
[[ $prefix_arg =~ ^[A-Za-z0-9_./+@:=-]+$ ]] ||
    die "PREFIX may only contain [A-Za-z0-9_./+@:=-], got '$prefix_arg'"

# --- pick the interpreter -----------------------------------------------------
# manylinux images have no usable python3 on PATH by default, hence the
# /opt/python fallbacks.
python_ok() {
    command -v "$1" >/dev/null 2>&1 &&
        "$1" -c 'import sys, venv; sys.exit(sys.version_info < (3, 9))' >/dev/null 2>&1
}
python=
if [[ -n ${PYTHON:-} ]]; then
    python_ok "$PYTHON" || die "PYTHON='$PYTHON' is not a runnable Python >= 3.9 with venv"
    python=$PYTHON
else
    for candidate in python3 /opt/python/cp312-cp312/bin/python /opt/python/cp3*/bin/python; do
        if python_ok "$candidate"; then
            python=$candidate
            break
        fi
    done
    [[ -n $python ]] || die "no Python >= 3.9 found; set PYTHON=/path/to/python3"
fi

# --- venv -----------------------------------------------------------------------
lock_name=.install.lock
# Refuse to turn an unrelated non-empty directory into a venv.
has_foreign_entries() {
    local entry
    for entry in "$1"/* "$1"/.[!.]* "$1"/..?*; do
        [[ -e $entry || -L $entry ]] || continue
        [[ ${entry##*/} == "$lock_name" ]] || return 0
    done
    return 1
}
if [[ -d $prefix_arg && ! -f $prefix_arg/pyvenv.cfg ]] && has_foreign_entries "$prefix_arg"; then
    die "$prefix_arg exists, is not empty and is not a venv"
fi
mkdir -p "$prefix_arg"
prefix=$(cd "$prefix_arg" && pwd -P)

# Serialise concurrent runs on one prefix (flock is in util-linux on both
# Debian and AlmaLinux; skip quietly where it is missing).
if command -v flock >/dev/null 2>&1; then
    exec 9>"$prefix/$lock_name"
    flock 9
fi

venv_python=$prefix/bin/python
if ! "$venv_python" -c 'import pip' >/dev/null 2>&1; then
    # Missing or broken (e.g. its base Python went away): rebuild from scratch,
    # but keep the lock file other runs may be waiting on.
    rm -rf "${prefix:?}"/{bin,include,lib,lib64,pyvenv.cfg,cuda,env.sh,.cuda-toolkit-requirement}
    log "creating venv $prefix with $("$python" -c 'import sys; print(sys.executable)')"
    "$python" -m venv "$prefix" >&2
    # PEP 600 tags (manylinux_2_27 cublas wheel) need pip >= 20.3.
    if ! "$venv_python" -c 'import pip, sys; sys.exit(int(pip.__version__.split(".")[0]) < 21)'; then
        "$venv_python" -m pip install --disable-pip-version-check --upgrade 'pip>=23' >&2
    fi
fi

# Where the wheels land: site-packages/nvidia/cuMAJOR (purelib or platlib,
# which differ on some RHEL-style Pythons).
find_root() {
    local dir
    for dir in $("$venv_python" -c 'import sysconfig as s; print(s.get_path("purelib")); print(s.get_path("platlib"))'); do
        if [[ -x $dir/nvidia/cu$cuda_major/bin/nvcc ]]; then
            (cd "$dir/nvidia/cu$cuda_major" && pwd -P)
            return 0
        fi
    done
    return 1
}

# --- install ------------------------------------------------------------------------
# The stamp makes re-runs skip pip entirely (no index traffic) when nothing changed.
stamp=$prefix/.cuda-toolkit-requirement
fresh_install=0
if [[ -f $stamp && $(<"$stamp") == "$requirement" ]] && find_root >/dev/null; then
    log "already installed: $requirement"
else
    log "installing $requirement into $prefix (cuBLAS wheel is ~400 MB)"
    rm -f "$stamp"
    start=$SECONDS
    "$venv_python" -m pip install --disable-pip-version-check --no-input \
        --progress-bar off --only-binary=:all: "$requirement" >&2
    log "pip install took $((SECONDS - start)) s; installed:"
    "$venv_python" -m pip list --disable-pip-version-check --format=freeze 2>/dev/null |
        grep -iE '^(cuda|nvidia)' | sed 's/^/    /' >&2 || true
    printf '%s\n' "$requirement" >"$stamp"
    fresh_install=1
fi

root=$(find_root) || die "nvidia/cu$cuda_major/bin/nvcc not found in $prefix's site-packages"

# --- make the wheel tree a toolkit root ---------------------------------------------
# nvcc.profile adds -L$(TOP)/lib64 and FindCUDAToolkit also probes lib64.
if [[ ! -e $root/lib64 ]]; then
    ln -s lib "$root/lib64"
fi

# Wheels ship only sonames (libcublasLt.so.13); the linker and find_library()
# need the unversioned dev name. Newest version wins if there are several.
# Dangling links left behind by a version change are dropped first.
find "$root/lib" -maxdepth 1 -type l -name 'lib*.so' ! -exec test -e {} \; -delete
declare -A dev_link=()
while IFS= read -r lib; do
    name=${lib##*/}
    dev_link[${name%%.so.*}.so]=$name
done < <(find "$root/lib" -maxdepth 1 -type f -name 'lib*.so.*' | sort -V)
for link in "${!dev_link[@]}"; do
    # Never replace a real file that a wheel might ship one day.
    if [[ -L $root/lib/$link || ! -e $root/lib/$link ]]; then
        ln -sfn "${dev_link[$link]}" "$root/lib/$link"
    fi
done

# Stable, Python-version-independent alias for static configs (CIBW_ENVIRONMENT).
ln -sfn "${root#"$prefix"/}" "$prefix/cuda"

# --- sanity checks --------------------------------------------------------------------
missing=()
for f in bin/nvcc bin/ptxas bin/cudafe++ bin/fatbinary bin/nvlink bin/crt/link.stub \
    nvvm/bin/cicc nvvm/libdevice/libdevice.10.bc \
    include/cuda_runtime.h include/cuda_fp16.h include/cuda_bf16.h include/crt/host_config.h \
    include/cublasLt.h include/cublas_v2.h include/cccl/cub/cub.cuh include/cccl/thrust/version.h \
    lib64/libcudart.so lib64/libcudart_static.a lib64/libcudadevrt.a \
    lib64/libcublas.so lib64/libcublasLt.so; do
    [[ -e $root/$f ]] || missing+=("$f")
done
((${#missing[@]} == 0)) || die "toolkit at $root is incomplete (missing: ${missing[*]}); rm -rf $prefix and re-run"

nvcc_version=$("$root/bin/nvcc" --version) || die "$root/bin/nvcc does not run"
[[ $nvcc_version =~ release\ ([0-9]+\.[0-9]+),\ (V[0-9.]+) ]] ||
    die "cannot parse 'nvcc --version': $nvcc_version"
[[ ${BASH_REMATCH[1]} == "$cuda_major.$cuda_minor" ]] ||
    die "nvcc reports release ${BASH_REMATCH[1]}, expected $cuda_major.$cuda_minor"
nvcc_release="CUDA ${BASH_REMATCH[1]} (nvcc ${BASH_REMATCH[2]})"

# After a (re)install, compile one kernel to prove cicc/ptxas/crt/cccl fit
# together. Needs a host compiler; skipped with a warning if there is none.
if ((fresh_install)); then
    ccbin=()
    [[ -z ${CUDAHOSTCXX:-} ]] || ccbin=(-ccbin "$CUDAHOSTCXX")
    if command -v "${CUDAHOSTCXX:-g++}" >/dev/null 2>&1; then
        tmp=$(mktemp -d)
        trap 'rm -rf "$tmp"' EXIT
        cat >"$tmp/smoke.cu" <<'EOF'
#include <cuda_bf16.h>
#include <cub/block/block_reduce.cuh>
__global__ void smoke(const __nv_bfloat16 *x, float *y) {
    using Reduce = cub::BlockReduce<float, 32>;
    __shared__ typename Reduce::TempStorage tmp;
    float s = Reduce(tmp).Sum(__bfloat162float(x[threadIdx.x]));
    if (threadIdx.x == 0) *y = s;
}
EOF
        "$root/bin/nvcc" "${ccbin[@]}" -std=c++17 -arch=sm_90 -c "$tmp/smoke.cu" -o "$tmp/smoke.o" >&2 ||
            die "nvcc failed to compile a smoke-test kernel"
        log "nvcc smoke compile OK"
    else
        log "warning: no host C++ compiler, skipped the nvcc smoke compile"
    fi
fi

# --- env.sh ---------------------------------------------------------------------------
# POSIX sh so any shell can source it; guarded so sourcing twice keeps PATH tidy.
# LD_LIBRARY_PATH is deliberately left alone: it would override torch's own
# RUNPATH-resolved CUDA libraries at run time.
env_file=$prefix/env.sh
cat >"$env_file.tmp" <<EOF
# Generated by tools/install_cuda_toolkit.sh ($requirement). Source me.
CUDA_HOME='$root'
export CUDA_HOME
export CUDA_PATH="\$CUDA_HOME"
export CUDAToolkit_ROOT="\$CUDA_HOME"
export CUDA_TOOLKIT_ROOT_DIR="\$CUDA_HOME"
export CUDACXX="\$CUDA_HOME/bin/nvcc"
case ":\${PATH:-}:" in
    *":\$CUDA_HOME/bin:"*) ;;
    *) export PATH="\$CUDA_HOME/bin\${PATH:+:\$PATH}" ;;
esac
EOF
mv -f "$env_file.tmp" "$env_file"

log "ready: $nvcc_release"
log "toolkit root: $root (alias $prefix/cuda); use: source $env_file"
printf '%s\n' "$root"
