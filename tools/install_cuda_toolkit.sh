#!/usr/bin/env bash
# Install a pinned CUDA toolkit into PREFIX and make it look like a regular
# toolkit root for nvcc and CMake.
#
#   tools/install_cuda_toolkit.sh CUDA_VERSION PREFIX
#   e.g. tools/install_cuda_toolkit.sh 13.0 /opt/fusedops-cuda-13.0
#        tools/install_cuda_toolkit.sh 12.4 /opt/fusedops-cuda-12.4
#
# CUDA >= 13: NVIDIA's pip wheels. CUDA_VERSION is MAJOR.MINOR (mapped to an
#   exact cuda-toolkit release below) or an exact release such as 13.0.3.0.
# CUDA 12.4: no pip wheel has a CUDA 12 nvcc, so it comes from Debian trixie's
#   non-free nvidia-cuda-toolkit packages (pinned below), fetched by apt-get
#   with a private configuration (the system's apt state is not touched) and
#   unpacked into PREFIX; CUB/Thrust/libcu++ from the nvidia-cuda-cccl-cu12
#   wheel. Needs apt-get and dpkg-deb (Debian/Ubuntu, amd64). On RHEL-likes
#   with dnf (manylinux_2_28, as root) it installs NVIDIA's pinned 12.4.1 rpms
#   from NVIDIA's rhel8 repository into /usr/local/cuda-12.4 instead, with
#   gcc-toolset-13 as the host compiler (12.4 accepts gcc <= 13); PREFIX/cuda
#   then links there. (That path cannot run on the Debian CI machine: it is
#   exercised by .github/workflows/wheels.yml only.)
# Env: PYTHON = interpreter for the venv (default: python3, else manylinux's
#      /opt/python/cp312-cp312/bin/python); CUDAHOSTCXX = host compiler for
#      the post-install nvcc smoke test (default: nvcc's, i.e. gcc; for 12.4
#      the newest g++ <= 13 found); FUSEDOPS_DEBIAN_MIRROR = Debian mirror for
#      12.4 (default: the one in the system's apt sources); CUDA_TARGET=aarch64
#      (CUDA >= 13): a toolkit that cross-compiles for Linux aarch64 (GH200,
#      GB200; tools/aarch64/): nvcc stays x86-64, lib/ holds the aarch64 CUDA
#      runtime and cuBLAS of the same releases (NVIDIA's manylinux aarch64
#      wheels) instead of the x86-64 ones, targets/{sbsa,aarch64}-linux point
#      at include/ and lib/ (where nvcc looks with an aarch64 host compiler),
#      and env.sh sets CUDAHOSTCXX=aarch64-linux-gnu-g++ unless already set.
#
# Result:
#   PREFIX/                    venv that owns the wheels (pip uninstall works)
#   PREFIX/cuda                toolkit root: for >= 13 a link to
#                              lib/python3.X/site-packages/nvidia/cuMAJOR, for
#                              12.4 a directory (bin, nvvm, include, lib64)
#   PREFIX/env.sh              `source` it: CUDA_HOME, CUDACXX, PATH, ...
#                              (12.4: also CUDAHOSTCXX unless already set)
#   PREFIX/host-cxx            the host compiler nvcc is to use (12.4: a g++ <= 13,
#                              else g++), for configs that cannot source env.sh
# The toolkit root is printed as the last line of stdout; all logs go to stderr.
#
# Used by .ci/run and by cibuildwheel's before-all (manylinux_2_28), so keep it
# distro-neutral: bash, coreutils and a Python >= 3.9 only (the 12.4 path
# additionally apt-get/dpkg-deb).
set -euo pipefail

log() { printf '[install_cuda_toolkit] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
# shellcheck source=tools/private_apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/private_apt.sh"

usage() {
    # The comment block at the top of this file.
    awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" >&2
    exit 2
}

# --- CUDA 12.4 from Debian (data) ---------------------------------------------
# Exact versions and the .deb SHA256s (as listed in trixie's signed Packages
# index), so the toolkit cannot silently move. nvidia-cuda-toolkit: nvcc,
# cicc, ptxas, fatbinary, nvlink, cudafe++, crt stubs, libdevice;
# nvidia-cuda-dev: headers, libcudart.so/_static.a, libcudadevrt.a, dev links
# (only those parts are unpacked: the rest is ~3 GB of static libraries);
# libcudart12/libcublas12/libcublaslt12/libnvvm4: the shared libraries.
# If trixie drops these versions, apt-get download fails: bump them here.
debian_suite=trixie
debian_components="main contrib non-free"
debian_keyring=/usr/share/keyrings/debian-archive-keyring.gpg
debian_cuda12_debs=(
    "nvidia-cuda-toolkit=12.4.131~12.4.1-2 cd5fe85aee38d108b315f408a688641478f2402622a10c677478eb7a6c4e5319"
    "nvidia-cuda-dev=12.4.127~12.4.1-2 d846838f914a0176948d48a8bcade5d6dbcccb5c9374343f6475f5503f173ee0"
    "libcudart12=12.4.127~12.4.1-2 361b3721cf84bf068e111ff013c819de61cb475268b0d38db99839471f1b4130"
    "libcublas12=12.4.5.8~12.4.1-2 2ddc22809d16b157021a4d57db6b2221cf7c46f42654c95df86ce73beb15c1f7"
    "libcublaslt12=12.4.5.8~12.4.1-2 2f67754a6dd7095de1a5c4503f20539981f31f0cd627565973c547e997fc7732"
    "libnvvm4=12.4.131~12.4.1-2 3c905c1df7453e1ad477516c4465629c310d2f58a796d66f44070dc289e7ec12"
)
# CUB/Thrust/libcu++: Debian's nvidia-cuda-dev leaves them to other packages,
# and the 12.4 wheel (12.4.127) is yanked and lacks nv/target; 12.6's CCCL
# supports nvcc 12.4. Hash-pinned (x86_64 wheel).
cccl12_requirement="nvidia-cuda-cccl-cu12==12.6.77 --hash=sha256:ea80be91ccd49b0785fd744afd470cd0c0175bcf25d4fe65b7d548095b68687a"
# CUDA 12.4's crt/host_config.h rejects gcc > 13.
cuda12_max_gcc=13
# NVIDIA's rpms of CUDA 12.4.1 (RHEL 8 / manylinux_2_28): the same component
# versions as the Debian set above.
nvidia_rhel8_repo=https://developer.download.nvidia.com/compute/cuda/repos/rhel8/x86_64/cuda-rhel8.repo
nvidia_cuda12_rpms=(
    cuda-nvcc-12-4-12.4.131-1 cuda-cudart-devel-12-4-12.4.127-1 cuda-cccl-12-4-12.4.127-1
    libcublas-devel-12-4-12.4.5.8-1 gcc-toolset-13-gcc-c++
)

[[ $# -eq 2 ]] || usage
cuda_version=$1
prefix_arg=$2

[[ $cuda_version =~ ^[0-9]+\.[0-9]+(\.[0-9]+)*$ ]] ||
    die "CUDA_VERSION must look like 13.0 or 13.0.3.0, got '$cuda_version'"
cuda_major=${cuda_version%%.*}
cuda_minor=${cuda_version#*.}
cuda_minor=${cuda_minor%%.*}
# CUDA >= 13: merged nvidia/cuXX wheels. CUDA 12 wheels use a per-component
# layout and have no nvcc, so 12.4 comes from Debian's packages instead.
if ((cuda_major >= 13)); then
    source_kind=wheels
elif [[ $cuda_major.$cuda_minor == 12.4 ]] && command -v apt-get >/dev/null 2>&1 &&
    command -v dpkg-deb >/dev/null 2>&1; then
    source_kind=debian
    [[ $(dpkg --print-architecture 2>/dev/null) == amd64 ]] ||
        die "CUDA 12.4 from Debian: only amd64 is pinned here, this is $(dpkg --print-architecture 2>/dev/null || uname -m)"
elif [[ $cuda_major.$cuda_minor == 12.4 ]] && command -v dnf >/dev/null 2>&1; then
    source_kind=rpm
    [[ $(uname -m) == x86_64 ]] || die "CUDA 12.4 rpms: only x86_64 is pinned here, this is $(uname -m)"
    ((EUID == 0)) || die "CUDA 12.4 from NVIDIA's rpm repository installs system packages: run as root"
elif [[ $cuda_major.$cuda_minor == 12.4 ]]; then
    die "CUDA 12.4 comes from Debian trixie's packages (apt-get + dpkg-deb) or NVIDIA's rhel8 rpms (dnf); this system has neither"
else
    die "CUDA $cuda_major.$cuda_minor is not supported: use 12.4 or >= 13"
fi

# Exact cuda-toolkit release per MAJOR.MINOR: `==13.0.*` alone would silently
# move when NVIDIA publishes a new patch release. The extras pin every
# component (13.0.3.0 -> nvcc/crt/nvvm 13.0.88, cudart 13.0.96, cccl 13.0.85,
# cublas 13.1.1.3 = the cuBLAS torch 2.14.1 uses, nvrtc 13.0.88).
case $cuda_version in
    12.4 | 12.4.*) toolkit_version=12.4 ;; # the Debian pins above
    13.0) toolkit_version=13.0.3.0 ;;
    *.*.*) toolkit_version=$cuda_version ;;
    *)
        toolkit_version="$cuda_version.*"
        log "warning: no exact pin known for CUDA $cuda_version; using cuda-toolkit==$toolkit_version"
        ;;
esac
# nvcc itself needs nvvm (cicc, libdevice), crt headers and cudart; cccl gives
# cub/thrust/libcu++; cublas gives cuBLAS + cuBLASLt (and pulls nvrtc).
if [[ $source_kind == wheels ]]; then
    requirement="cuda-toolkit[nvcc,cudart,cccl,crt,cublas]==$toolkit_version"
elif [[ $source_kind == rpm ]]; then
    requirement="nvidia-rhel8:${nvidia_cuda12_rpms[*]}"
else
    # Recorded in the stamp: a change of any pin triggers a re-install.
    requirement="debian-$debian_suite:${debian_cuda12_debs[*]%% *} + ${cccl12_requirement%% *}"
fi

target=${CUDA_TARGET:-}
if [[ -n $target ]]; then
    [[ $target == aarch64 && $source_kind == wheels ]] ||
        die "CUDA_TARGET=$target: only aarch64, with CUDA >= 13 (NVIDIA's pip wheels)"
fi

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

# Temporary files and directories, removed on exit whatever happens.
cleanup=()
trap 'rm -rf "${cleanup[@]}"' EXIT

# Where a wheel's files land: site-packages/SUBDIR (purelib or platlib, which
# differ on some RHEL-style Pythons), with site-packages' physical path.
find_in_site() {
    local dir
    for dir in $("$venv_python" -c 'import sysconfig as s; print(s.get_path("purelib")); print(s.get_path("platlib"))'); do
        if [[ -e $dir/$1 ]]; then
            printf '%s/%s\n' "$(cd "$dir" && pwd -P)" "$1"
            return 0
        fi
    done
    return 1
}

# The toolkit root: the nvidia/cuMAJOR wheel tree, or PREFIX/cuda for 12.4.
find_root() {
    if [[ $source_kind == wheels ]]; then
        local nvcc
        nvcc=$(find_in_site "nvidia/cu$cuda_major/bin/nvcc") || return 1
        [[ -x $nvcc ]] && printf '%s\n' "${nvcc%/bin/nvcc}"
    elif [[ $source_kind == rpm ]]; then
        [[ -x $prefix/cuda/bin/nvcc ]] && (cd "$prefix/cuda" && pwd -P)
    else
        [[ -x $prefix/cuda/bin/nvcc && ! -L $prefix/cuda ]] && (cd "$prefix/cuda" && pwd -P)
    fi
}

# --- CUDA 12.4 from NVIDIA's rpm repository (manylinux_2_28) ------------------------
# dnf checks the packages against NVIDIA's repository key (gpgcheck=1 in the .repo).
install_rpm_cuda12() {
    log "installing ${nvidia_cuda12_rpms[*]} from $nvidia_rhel8_repo"
    dnf -y -q install dnf-plugins-core >&2
    dnf config-manager --add-repo "$nvidia_rhel8_repo" >&2
    dnf -y -q install "${nvidia_cuda12_rpms[@]}" >&2 || die "dnf install of the CUDA 12.4.1 rpms failed"
    [[ -x /usr/local/cuda-12.4/bin/nvcc ]] || die "the rpms left no /usr/local/cuda-12.4/bin/nvcc"
    [[ -L $prefix/cuda || ! -e $prefix/cuda ]] || rm -rf "${prefix:?}/cuda"
    ln -sfn /usr/local/cuda-12.4 "$prefix/cuda"
}

# --- CUDA 12.4 from Debian trixie -------------------------------------------------
# apt runs with tools/private_apt.sh's private configuration; the pinned
# SHA256s above are checked once more after the download.

# The system's Debian mirror (first .../debian source), else deb.debian.org.
debian_mirror() {
    local uri
    if [[ -n ${FUSEDOPS_DEBIAN_MIRROR:-} ]]; then
        printf '%s\n' "${FUSEDOPS_DEBIAN_MIRROR%/}"
        return
    fi
    # shellcheck disable=SC2016 # $(REPO_URI) is apt's placeholder
    uri=$(apt-get indextargets --format '$(REPO_URI)' 2>/dev/null |
        awk '$1 ~ /^https?:\/\/[^ ]*\/debian\/?$/ { print $1; exit }') || uri=
    uri=${uri:-http://deb.debian.org/debian}
    printf '%s\n' "${uri%/}"
}

# Download the pinned .debs into $1/debs, with private apt state under $1.
fetch_debian_cuda12() {
    local work=$1 mirror entry file specs=()
    local apt_conf=$work/apt.conf
    mirror=$(debian_mirror)
    [[ -r $debian_keyring ]] || die "$debian_keyring not found (Debian package debian-archive-keyring)"
    mkdir -p "$work/debs"
    printf 'deb [signed-by=%s] %s %s %s\n' "$debian_keyring" "$mirror" "$debian_suite" \
        "$debian_components" >"$work/sources.list"
    private_apt "$work" amd64
    # apt downloads as user _apt where it can; let it write the target dir.
    if ((EUID == 0)) && id _apt >/dev/null 2>&1; then
        chown _apt "$work/debs"
    fi

    log "fetching Debian $debian_suite package lists from $mirror"
    APT_CONFIG=$apt_conf apt-get -q update >&2 ||
        die "apt-get update of $mirror $debian_suite ($debian_components) failed, see above"
    for entry in "${debian_cuda12_debs[@]}"; do
        specs+=("${entry%% *}")
    done
    log "downloading ${specs[*]} (~1.3 GB)"
    (cd "$work/debs" && APT_CONFIG=$apt_conf apt-get -q download "${specs[@]}") >&2 ||
        die "apt-get download failed (a pinned version gone from Debian $debian_suite? then update debian_cuda12_debs in $0)"
    for entry in "${debian_cuda12_debs[@]}"; do
        file=${entry%% *}
        file=$work/debs/${file%%=*}_${file#*=}_amd64.deb
        [[ -f $file ]] || die "apt-get download left no $file"
        printf '%s  %s\n' "${entry##* }" "$file" | sha256sum -c --quiet - >&2 ||
            die "SHA256 mismatch for ${file##*/}"
    done
}

# Unpack the .debs (no dpkg -i) and arrange them as a regular toolkit root in $2.
unpack_debian_cuda12() {
    local debs=$1/debs x=$1/x root=$2 deb tool
    local multiarch=usr/lib/x86_64-linux-gnu
    mkdir -p "$x"
    for deb in "$debs"/*.deb; do
        case ${deb##*/} in
            nvidia-cuda-dev_*)
                # Headers, the runtime/cuBLAS dev links, the static cudart and
                # devrt; not the other ~3 GB (static cuFFT, cuSPARSE, NPP, ...).
                dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$x" --wildcards \
                    './usr/include/*' "./$multiarch/libcudart.so" "./$multiarch/libcudart_static.a" \
                    "./$multiarch/libcudadevrt.a" "./$multiarch/libculibos.a" \
                    "./$multiarch/libcublas.so" "./$multiarch/libcublasLt.so" \
                    "./$multiarch/libnvvm.so" "./$multiarch/stubs/libcuda.so"
                ;;
            *) dpkg-deb -x "$deb" "$x" ;;
        esac
    done

    # Debian spreads the toolkit over /usr/bin, /usr/lib/nvidia-cuda-toolkit and
    # the multiarch dir; NVIDIA's layout (and FindCUDAToolkit) wants one root.
    local tk=$x/usr/lib/nvidia-cuda-toolkit
    mkdir -p "$root"/{bin,nvvm/bin,nvvm/libdevice,nvvm/include,nvvm/lib64,include,lib64/stubs}
    # The real nvcc; /usr/bin/nvcc is Debian's wrapper script.
    mv "$tk/bin/nvcc" "$tk/bin/crt" "$root/bin/"
    for tool in ptxas fatbinary nvlink cudafe++ bin2c cuobjdump nvdisasm nvprune cu++filt; do
        mv "$x/usr/bin/$tool" "$root/bin/"
    done
    mv "$tk/bin/cicc" "$root/nvvm/bin/"
    mv "$tk/libdevice/libdevice.10.bc" "$root/nvvm/libdevice/"
    mv "$x/usr/include/nvvm.h" "$root/nvvm/include/"
    mv "$x/usr/include"/* "$root/include/"
    mv "$x/$multiarch"/libnvvm.so* "$root/nvvm/lib64/"
    mv "$x/$multiarch/stubs/libcuda.so" "$root/lib64/stubs/"
    mv "$x/$multiarch"/lib* "$root/lib64/"
    ln -s lib64 "$root/lib"

    # nvcc reads bin/nvcc.profile (Debian's is a link to /etc/nvcc.profile with
    # /usr paths). This is NVIDIA's own profile for a flat (non-targets/)
    # layout; everything is relative to bin/, so the root can move.
    cat >"$root/bin/nvcc.profile" <<'EOF'

TOP              = $(_HERE_)/..

CICC_PATH        = $(TOP)/nvvm/bin
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice

LD_LIBRARY_PATH += $(TOP)/lib64:
PATH            += $(CICC_PATH):$(_HERE_):

INCLUDES        +=  "-I$(TOP)/include" $(_SPACE_)

LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/lib64/stubs" "-L$(TOP)/lib64"

CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
EOF
}

# CUB/Thrust/libcu++ from the pinned wheel, linked into $1/include where a
# toolkit has them (relative links: $1 is renamed to PREFIX/cuda later).
install_cccl12() {
    local root=$1 req=$2 inc dir
    printf '%s\n' "$cccl12_requirement" >"$req"
    "$venv_python" -m pip install --disable-pip-version-check --no-input --progress-bar off \
        --only-binary=:all: --no-deps --require-hashes -r "$req" >&2 ||
        die "pip install ${cccl12_requirement%% *} failed"
    inc=$(find_in_site nvidia/cuda_cccl/include) || die "nvidia/cuda_cccl/include not found in $prefix"
    for dir in cub thrust cuda nv; do
        [[ -d $inc/$dir ]] || die "$inc/$dir missing from ${cccl12_requirement%% *}"
        ln -s "$(realpath --relative-to="$root/include" "$inc/$dir")" "$root/include/$dir"
    done
}

install_debian_cuda12() {
    local work=$prefix/.cuda12-work stage=$prefix/.cuda-new
    rm -rf "$work" "$stage"
    cleanup+=("$work" "$stage")
    mkdir -p "$work" "$stage"
    fetch_debian_cuda12 "$work"
    unpack_debian_cuda12 "$work" "$stage"
    rm -rf "$work/debs" "$work/x"
    install_cccl12 "$stage" "$work/cccl-requirements.txt"
    # Swap in the complete tree only now: a failed run leaves the old one.
    rm -rf "${prefix:?}/cuda"
    mv "$stage" "$prefix/cuda"
}

# --- install ------------------------------------------------------------------------
# The stamp makes re-runs skip pip entirely (no index traffic) when nothing changed.
stamp=$prefix/.cuda-toolkit-requirement
fresh_install=0
# The target is in it too: a prefix of one target is never taken for the other's.
stamp_value="$requirement${target:+ target=$target}"
if [[ -f $stamp && $(<"$stamp") == "$stamp_value" ]] && find_root >/dev/null; then
    log "already installed: $requirement"
else
    rm -f "$stamp"
    start=$SECONDS
    if [[ $source_kind == wheels ]]; then
        log "installing $requirement into $prefix (cuBLAS wheel is ~400 MB)"
        "$venv_python" -m pip install --disable-pip-version-check --no-input \
            --progress-bar off --only-binary=:all: "$requirement" >&2
        log "pip install took $((SECONDS - start)) s; installed:"
        "$venv_python" -m pip list --disable-pip-version-check --format=freeze 2>/dev/null |
            grep -iE '^(cuda|nvidia)' | sed 's/^/    /' >&2 || true
    elif [[ $source_kind == rpm ]]; then
        install_rpm_cuda12
        log "install took $((SECONDS - start)) s"
    else
        log "installing CUDA 12.4 from Debian $debian_suite into $prefix/cuda"
        install_debian_cuda12
        log "install took $((SECONDS - start)) s"
    fi
    printf '%s\n' "$stamp_value" >"$stamp"
    fresh_install=1
fi

root=$(find_root) || die "no toolkit root with bin/nvcc found in $prefix"

# --- make the wheel tree a toolkit root ---------------------------------------------
# (The 12.4 tree is laid out as one already, as PREFIX/cuda itself.)
if [[ $source_kind == wheels ]]; then
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

    # Stable, Python-version-independent alias for static configs
    # (CIBW_ENVIRONMENT); a 12.4 install left a real directory there.
    [[ -L $prefix/cuda || ! -e $prefix/cuda ]] || rm -rf "${prefix:?}/cuda"
    ln -sfn "${root#"$prefix"/}" "$prefix/cuda"
fi

# --- aarch64 target libraries (CUDA_TARGET=aarch64) -------------------------------------
# The runtime and cuBLAS wheels' aarch64 builds, pinned to the versions just
# installed, replace the x86-64 libraries in lib/ (nvcc's own tools load none
# of them). A manylinux_2_28 system takes wheels tagged down to 2.17.
place_aarch64_libraries() {
    local dl=$prefix/.aarch64-wheels whl pins=() tags=(--platform manylinux2014_aarch64) glibc
    mapfile -t pins < <("$venv_python" -m pip list --disable-pip-version-check --format=freeze 2>/dev/null |
        grep -E '^nvidia-(cuda-runtime|cublas)==')
    ((${#pins[@]} == 2)) || die "CUDA_TARGET=aarch64: no nvidia-cuda-runtime and nvidia-cublas pins in $prefix"
    for glibc in $(seq 17 28); do tags+=(--platform "manylinux_2_${glibc}_aarch64"); done
    rm -rf "$dl"
    cleanup+=("$dl")
    log "downloading the aarch64 builds of ${pins[*]}"
    "$venv_python" -m pip download --disable-pip-version-check --quiet --no-deps --only-binary=:all: \
        "${tags[@]}" -d "$dl" "${pins[@]}" >&2 || die "pip download of the aarch64 ${pins[*]} failed"
    for whl in "$dl"/*.whl; do "$venv_python" -m zipfile -e "$whl" "$dl/x"; done
    cp -f "$dl/x/nvidia/cu$cuda_major/lib"/lib* "$root/lib/"
    rm -rf "$dl"
    for dir in sbsa-linux aarch64-linux; do
        mkdir -p "$root/targets/$dir"
        ln -sfn ../../include "$root/targets/$dir/include"
        ln -sfn ../../lib "$root/targets/$dir/lib"
    done
}
elf_machine() { od -An -tu2 -j18 -N2 "$1" 2>/dev/null | tr -d ' '; } # 183: AArch64
if [[ $target == aarch64 ]]; then
    [[ $(elf_machine "$root/lib/libcudart.so.$cuda_major") == 183 ]] || place_aarch64_libraries
    for lib in libcudart libcublas libcublasLt; do
        [[ $(elf_machine "$root/lib/$lib.so.$cuda_major") == 183 ]] ||
            die "$root/lib/$lib.so.$cuda_major is not an aarch64 library"
    done
elif [[ $source_kind == wheels && $(elf_machine "$root/lib/libcudart.so.$cuda_major") == 183 ]]; then
    die "$prefix was set up for CUDA_TARGET=aarch64 (its lib/ is aarch64): rm -rf $prefix and re-run"
fi

# --- sanity checks --------------------------------------------------------------------
# CCCL sits in include/cccl in the 13 wheels, in include itself for 12.4.
cccl_inc=include/cccl
[[ $source_kind == wheels ]] || cccl_inc=include
missing=()
for f in bin/nvcc bin/ptxas bin/cudafe++ bin/fatbinary bin/nvlink bin/crt/link.stub \
    nvvm/bin/cicc nvvm/libdevice/libdevice.10.bc \
    include/cuda_runtime.h include/cuda_fp16.h include/cuda_bf16.h include/crt/host_config.h \
    include/cublasLt.h include/cublas_v2.h $cccl_inc/cub/cub.cuh $cccl_inc/thrust/version.h \
    $cccl_inc/cuda/std/version $cccl_inc/nv/target \
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

# CUDA 12.4 rejects gcc > 13 (Debian 13 has g++ 14): find the newest g++ it
# accepts, for the smoke test and as env.sh's default CUDAHOSTCXX.
default_host_cxx=
if [[ $source_kind != wheels ]]; then
    for cxx in g++ g++-13 g++-12 g++-11 g++-10 g++-9 /opt/rh/gcc-toolset-13/root/usr/bin/g++; do
        cxx=$(command -v "$cxx") || continue
        gcc_major=$("$cxx" -dumpversion 2>/dev/null) || continue
        if [[ ${gcc_major%%.*} =~ ^[0-9]+$ ]] && ((${gcc_major%%.*} <= cuda12_max_gcc)); then
            default_host_cxx=$cxx
            break
        fi
    done
    [[ -n $default_host_cxx ]] ||
        log "warning: no g++ <= $cuda12_max_gcc found; CUDA 12.4's nvcc needs one (set CUDAHOSTCXX or use nvcc -ccbin)"
fi
if [[ $target == aarch64 ]]; then
    default_host_cxx=aarch64-linux-gnu-g++
fi
host_cxx=${CUDAHOSTCXX:-$default_host_cxx}

# After a (re)install, compile one kernel to prove cicc/ptxas/crt/cccl fit
# together. Needs a host compiler; skipped with a warning if there is none.
if ((fresh_install)); then
    ccbin=()
    [[ -z $host_cxx ]] || ccbin=(-ccbin "$host_cxx")
    if command -v "${host_cxx:-g++}" >/dev/null 2>&1; then
        tmp=$(mktemp -d)
        cleanup+=("$tmp")
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
if [[ -n $default_host_cxx ]]; then
    cat >>"$env_file.tmp" <<EOF
# The host compiler this nvcc is to use (CUDA 12.4: a gcc <= $cuda12_max_gcc; an aarch64 target: the cross g++), unless the caller chose one.
if [ -z "\${CUDAHOSTCXX:-}" ]; then
    CUDAHOSTCXX='$default_host_cxx'
    export CUDAHOSTCXX
fi
EOF
fi
mv -f "$env_file.tmp" "$env_file"
printf '%s\n' "${default_host_cxx:-g++}" >"$prefix/host-cxx"

log "ready: $nvcc_release"
log "toolkit root: $root (alias $prefix/cuda); use: source $env_file"
printf '%s\n' "$root"
