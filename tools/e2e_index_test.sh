#!/usr/bin/env bash
# End-to-end test of the wheel index: build it from repaired wheels, serve it
# on 127.0.0.1 (static files and pypiserver), and install from it with pip the
# ways docs/install.md tells users to.
#
#   tools/e2e_index_test.sh WHEEL_DIR
#
# WHEEL_DIR holds repaired fusedops wheels: one CPU wheel (e.g. pt213cpu) is
# required; a CUDA wheel for another torch (e.g. pt214cu130) enables the
# negative cases and the CUDA-torch install.
# torch and its dependencies come from pip's own configuration (find-links,
# extra indexes): --index-url only replaces PyPI.
#
# Env:
#   E2E_CUDA_VENV   venv that already has the CUDA torch (used read-only, via
#                   a .pth file); without it one such venv is created
#   E2E_SKIP_CUDA=1 skip everything that needs a CUDA torch venv
#   E2E_WORK        work dir (default: a fresh temp dir, removed at exit)
#   E2E_TIMEOUT     overall limit in seconds (default 2400)
set -euo pipefail

if [[ -z ${_E2E_TIMED:-} ]]; then
    # Bound the whole run; timeout signals the process group, servers included.
    export _E2E_TIMED=1
    exec timeout --kill-after=30 "${E2E_TIMEOUT:-2400}" bash "$0" "$@"
fi

PYPISERVER=pypiserver==2.4.2
TWINE=twine==7.0.0
ROOT=$(cd "$(dirname "$0")/.." && pwd)

log() { printf '\n[e2e] %s\n' "$*" >&2; }
die() {
    printf '[e2e] error: %s\n' "$*" >&2
    exit 1
}

[[ $# -eq 1 && -d $1 ]] || {
    sed -n '2,22s/^# \{0,1\}//p' "$0" >&2
    exit 2
}
WHEEL_DIR=$(cd "$1" && pwd)

if [[ -n ${E2E_WORK:-} ]]; then
    W=$E2E_WORK
    mkdir -p "$W"
else
    W=$(mktemp -d "${TMPDIR:-/tmp}/fusedops-e2e.XXXXXX")
fi

PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    [[ -n ${E2E_WORK:-} ]] || rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PASSED=()
FAILED=()
pass() {
    PASSED+=("$1")
    printf '[e2e] PASS %s\n' "$1" >&2
}
fail() {
    FAILED+=("$1")
    printf '[e2e] FAIL %s\n' "$1" >&2
}

# -- helpers --------------------------------------------------------------

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_http() { # URL: poll up to 30 s
    python3 - "$1" <<'EOF'
import sys, time, urllib.request
for _ in range(60):
    try:
        urllib.request.urlopen(sys.argv[1], timeout=2).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.5)
sys.exit(f"no answer from {sys.argv[1]}")
EOF
}

# "VARIANT VERSION TORCH_MINOR" of a wheel, from its METADATA.
wheel_info() {
    python3 - "$1" <<'EOF'
import re, sys, zipfile
from email.parser import BytesParser
with zipfile.ZipFile(sys.argv[1]) as zf:
    name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
    msg = BytesParser().parsebytes(zf.read(name), headersonly=True)
pin = next(m for r in msg.get_all("Requires-Dist", []) if (m := re.match(r"torch==(\d+\.\d+)\.\*", r)))
print(msg["Version"].partition("+")[2], msg["Version"], pin[1])
EOF
}

new_venv() { # DIR
    python3 -m venv "$1"
}

quiet_pip() { # VENV ARGS...: pip, minus the noise about missing local mirrors
    local venv=$1 rc=0
    shift
    "$venv/bin/python" -m pip --disable-pip-version-check "$@" >"$W/pip.out" 2>&1 || rc=$?
    grep -v "is ignored: it is neither a file nor a directory" "$W/pip.out" >&2 || true
    return "$rc"
}

SMOKE='import torch, fusedops
a = torch.randn(5, 3)
b = torch.randn(3)
assert torch.allclose(fusedops.add(a, b), a + b)
print("smoke ok: fusedops", fusedops.__version__, "torch", torch.__version__)'

smoke() { # NAME VENV
    if "$2/bin/python" -c "$SMOKE" && "$2/bin/python" -m fusedops info; then
        pass "$1"
    else
        fail "$1"
    fi
}

# Wrong-variant wheel forced in: import must fail with our ImportError, naming
# both torch versions and an install command, not a loader error.
expect_import_error() { # NAME VENV WANT_TORCH_MINOR HAVE_TORCH_MINOR
    local out
    if out=$("$2/bin/python" -c 'import fusedops' 2>&1); then
        fail "$1 (import succeeded)"
        return
    fi
    printf '%s\n' "$out" | tail -5 >&2
    local msg
    # The message may go on over several lines (the install command).
    msg=$(printf '%s\n' "$out" | sed -n '/^ImportError/,$p')
    if [[ -z $msg ]]; then
        fail "$1 (no ImportError)"
    elif grep -qi 'undefined symbol' <<<"$out"; then
        fail "$1 (undefined symbol: the version check came too late)"
    elif ! grep -qF "$3" <<<"$msg" || ! grep -qF "$4" <<<"$msg"; then
        fail "$1 (message does not name torch $3 and $4)"
    elif ! grep -q 'pip install' <<<"$msg"; then
        fail "$1 (message has no install command)"
    else
        pass "$1"
    fi
}

# -- inputs ---------------------------------------------------------------

shopt -s nullglob
CPU_WHEEL='' CUDA_WHEEL=''
for w in "$WHEEL_DIR"/fusedops-*.whl; do
    read -r variant _ _ < <(wheel_info "$w")
    case $variant in
        pt*cpu) CPU_WHEEL=${CPU_WHEEL:-$w} ;;
        pt*cu*) CUDA_WHEEL=${CUDA_WHEEL:-$w} ;;
    esac
done
[[ -n $CPU_WHEEL ]] || die "no CPU fusedops wheel in $WHEEL_DIR"
read -r CPU_VARIANT CPU_VERSION CPU_TORCH < <(wheel_info "$CPU_WHEEL")
log "CPU wheel:  ${CPU_WHEEL##*/} (torch $CPU_TORCH)"
if [[ -n $CUDA_WHEEL ]]; then
    read -r CUDA_VARIANT CUDA_VERSION CUDA_TORCH < <(wheel_info "$CUDA_WHEEL")
    log "CUDA wheel: ${CUDA_WHEEL##*/} (torch $CUDA_TORCH)"
    [[ $CUDA_TORCH != "$CPU_TORCH" ]] ||
        log "note: both wheels target torch $CPU_TORCH; the negative cases need two torch versions"
fi
CPU_DEVICE=$(sed -E 's/^pt[0-9]+//' <<<"$CPU_VARIANT")
CPU_PAGE="torch-$CPU_TORCH+$CPU_DEVICE.html"

# -- index and servers ----------------------------------------------------

log "building the index"
HTTP_PORT=$(free_port)
STATIC="http://127.0.0.1:$HTTP_PORT"
python3 "$ROOT/tools/make_index.py" "$WHEEL_DIR" "$W/site" --base-url "$STATIC"

python3 -m http.server --bind 127.0.0.1 --directory "$W/site" "$HTTP_PORT" \
    >"$W/http.log" 2>&1 &
PIDS+=($!)
wait_http "$STATIC/index.html"
log "static index at $STATIC"

log "installing $PYPISERVER $TWINE"
python3 -m venv "$W/tools"
quiet_pip "$W/tools" install --quiet "$PYPISERVER" "$TWINE"
PYPI_PORT=$(free_port)
PYPI="http://127.0.0.1:$PYPI_PORT"
mkdir -p "$W/pypi-packages"
# -a . -P .: no auth on loopback; --disable-fallback: never redirect to PyPI.
"$W/tools/bin/pypi-server" run -i 127.0.0.1 -p "$PYPI_PORT" -a . -P . --disable-fallback \
    "$W/pypi-packages" >"$W/pypiserver.log" 2>&1 &
PIDS+=($!)
wait_http "$PYPI/simple/"
if "$W/tools/bin/twine" upload --non-interactive --disable-progress-bar \
    --repository-url "$PYPI/" -u e2e -p e2e "$WHEEL_DIR"/fusedops-*.whl; then
    pass "twine upload to pypiserver"
else
    fail "twine upload to pypiserver"
fi

# -- CPU variant: the four ways to install --------------------------------

log "[cpu] pip install --index-url $STATIC/$CPU_VARIANT/simple"
new_venv "$W/v-index"
if quiet_pip "$W/v-index" install fusedops --index-url "$STATIC/$CPU_VARIANT/simple"; then
    smoke "cpu: --index-url (static)" "$W/v-index"
else
    fail "cpu: --index-url (static) install"
fi

log "[cpu] pip install -f $STATIC/$CPU_PAGE"
new_venv "$W/v-findlinks"
# -f on the command line would replace the configured find-links (where torch
# may come from), so add ours to them instead. The exact pin keeps a same-named
# project on another index out.
cfg_links=$("$W/v-findlinks/bin/python" -m pip config get global.find-links 2>/dev/null || true)
if PIP_FIND_LINKS="$STATIC/$CPU_PAGE ${PIP_FIND_LINKS:-$cfg_links}" \
    quiet_pip "$W/v-findlinks" install "fusedops==$CPU_VERSION"; then
    smoke "cpu: -f find-links page" "$W/v-findlinks"
else
    fail "cpu: -f find-links page install"
fi

log "[cpu] pip install --require-hashes"
new_venv "$W/v-hashes"
mkdir -p "$W/dl"
quiet_pip "$W/v-hashes" download --quiet -d "$W/dl" "fusedops==$CPU_VERSION" \
    --index-url "$STATIC/$CPU_VARIANT/simple"
python3 - "$W/dl" >"$W/requirements.txt" <<'EOF'
import hashlib, pathlib, sys
for f in sorted(pathlib.Path(sys.argv[1]).iterdir()):
    name, version = f.name.split("-")[:2]
    print(f"{name}=={version} --hash=sha256:{hashlib.sha256(f.read_bytes()).hexdigest()}")
EOF
cat "$W/requirements.txt" >&2
if grep -q "^fusedops==$CPU_VERSION --hash" "$W/requirements.txt" &&
    quiet_pip "$W/v-hashes" install --require-hashes -r "$W/requirements.txt" \
        --index-url "$STATIC/$CPU_VARIANT/simple"; then
    smoke "cpu: --require-hashes" "$W/v-hashes"
else
    fail "cpu: --require-hashes install"
fi

log "[cpu] pip install from pypiserver $PYPI/simple/"
new_venv "$W/v-pypiserver"
# pypiserver serves every variant in one project; the local label picks ours.
if quiet_pip "$W/v-pypiserver" install "fusedops==$CPU_VERSION" --index-url "$PYPI/simple/"; then
    smoke "cpu: pypiserver" "$W/v-pypiserver"
else
    fail "cpu: pypiserver install"
fi

# -- negative cases and the CUDA torch ------------------------------------

if [[ -z $CUDA_WHEEL ]]; then
    log "no CUDA wheel: negative cases skipped"
else
    log "[neg] $CUDA_VERSION into torch $CPU_TORCH; no index offers torch $CUDA_TORCH"
    # No config: only our index, which has no torch, so pip must refuse on the
    # torch pin rather than fetch a second torch.
    out=$(
        unset PIP_FIND_LINKS PIP_EXTRA_INDEX_URL PIP_INDEX_URL
        export PIP_CONFIG_FILE=/dev/null
        quiet_pip "$W/v-index" install "fusedops==$CUDA_VERSION" \
            --index-url "$STATIC/$CUDA_VARIANT/simple" 2>&1
    ) && rc=0 || rc=$?
    printf '%s\n' "$out" | tail -4 >&2
    if ((rc != 0)) && grep -q "torch==$CUDA_TORCH" <<<"$out" &&
        "$W/v-index/bin/python" -c "import fusedops" 2>/dev/null; then
        pass "neg: pip refuses $CUDA_VARIANT on torch $CPU_TORCH (torch pin)"
    else
        fail "neg: pip refuses $CUDA_VARIANT on torch $CPU_TORCH (rc=$rc)"
    fi

    log "[neg] forced --no-deps install of $CUDA_VERSION into torch $CPU_TORCH"
    quiet_pip "$W/v-index" install --quiet --no-deps --force-reinstall \
        "$STATIC/wheels/$(basename "$CUDA_WHEEL" | sed 's/+/%2B/g')"
    expect_import_error "neg: $CUDA_VARIANT on torch $CPU_TORCH fails at import" \
        "$W/v-index" "$CUDA_TORCH" "$CPU_TORCH"

    if [[ ${E2E_SKIP_CUDA:-0} == 1 ]]; then
        log "E2E_SKIP_CUDA=1: CUDA torch venv skipped"
    else
        new_venv "$W/v-cuda"
        if [[ -n ${E2E_CUDA_VENV:-} ]]; then
            # Borrow the caller's torch without writing into its venv.
            site=$("$E2E_CUDA_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
            own=$("$W/v-cuda/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
            echo "$site" >"$own/_e2e_cuda_torch.pth"
            log "[cuda] reusing torch from $E2E_CUDA_VENV"
        else
            # torch first, from pip's usual sources (its CUDA dependencies may
            # only be on PyPI, which --index-url below would hide).
            log "[cuda] creating a CUDA torch $CUDA_TORCH venv (large)"
            quiet_pip "$W/v-cuda" install --quiet "torch==$CUDA_TORCH.*" ||
                fail "cuda: installing torch $CUDA_TORCH"
        fi
        log "[cuda] pip install --index-url $STATIC/$CUDA_VARIANT/simple"
        if quiet_pip "$W/v-cuda" install fusedops --index-url "$STATIC/$CUDA_VARIANT/simple"; then
            smoke "cuda: --index-url on torch $CUDA_TORCH (no GPU needed to import)" "$W/v-cuda"
        else
            fail "cuda: --index-url install"
        fi
        log "[neg] forced --no-deps install of $CPU_VERSION into torch $CUDA_TORCH"
        quiet_pip "$W/v-cuda" install --quiet --no-deps --force-reinstall "$CPU_WHEEL"
        expect_import_error "neg: $CPU_VARIANT on torch $CUDA_TORCH fails at import" \
            "$W/v-cuda" "$CPU_TORCH" "$CUDA_TORCH"
    fi
fi

# -- summary --------------------------------------------------------------

printf '\n[e2e] summary\n' >&2
for t in "${PASSED[@]}"; do printf '  PASS  %s\n' "$t" >&2; done
for t in "${FAILED[@]}"; do printf '  FAIL  %s\n' "$t" >&2; done
echo "e2e_index_test: ${#PASSED[@]} passed, ${#FAILED[@]} failed"
((${#FAILED[@]} == 0))
