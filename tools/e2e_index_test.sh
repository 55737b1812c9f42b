#!/usr/bin/env bash
# End-to-end test of the wheel index, one index per variant (cpu, cu12, cu13):
# build the static trees from repaired wheels (tools/make_index.py), serve them
# on 127.0.0.1 (static files, and pypiserver behind a password file with one
# index per variant at <base>/<variant>/simple/, the layout the loader's
# install command names), and install from them with pip and uv the ways
# docs/install.md tells users to.
#
#   tools/e2e_index_test.sh WHEEL_DIR
#
# WHEEL_DIR holds repaired fusedops wheels, at most one per variant: the cpu
# wheel is required; the wheel of the CUDA torch's variant (cu13 for a CUDA 13
# torch) enables the CUDA-torch installs; any CUDA wheel enables the
# wrong-variant cases (it must fail at import under the CPU torch, a cu12
# wheel under a CUDA 13 torch too, with the loader's message, whose install
# command must then work against this run's index).
# Every check is numbered and prints PASS or FAIL; the last line is
# "N passed, N failed", and the exit status is non-zero if any check failed.
#
# Env:
#   E2E_CUDA_VENV   venv that already has a CUDA torch, used read-only: its
#                   site-packages (minus fusedops) is hard-linked into each
#                   test venv, so it must be on the work dir's filesystem;
#                   without it one is created with torch==E2E_CUDA_TORCH
#                   (default 2.14.1, pip's usual sources: large download)
#   E2E_CPU_VENV    same for a CPU torch; default: one is created with
#                   torch==E2E_CPU_TORCH (default 2.13.0; must be a CPU build)
#   E2E_SKIP_CUDA=1 skip everything that needs a CUDA torch venv
#   E2E_WORK        work dir (default: a fresh temp dir, removed at exit)
#   E2E_TIMEOUT     overall limit in seconds (default 2400)
set -euo pipefail

if [[ -z ${_E2E_TIMED:-} ]]; then
    # Bound the whole run; timeout signals the process group, servers included,
    # and leaves the cleanup (removing the venvs) up to 2 minutes.
    export _E2E_TIMED=1
    exec timeout --kill-after=120 "${E2E_TIMEOUT:-2400}" bash "$0" "$@"
fi

PYPISERVER='pypiserver[passlib]==2.4.2'
BCRYPT=bcrypt==4.0.1 # passlib 1.7.4 breaks on bcrypt >= 4.1's missing __about__ / 5.0's 72-byte rule
TWINE=twine==7.0.0
UV=uv==0.13.9
ROOT=$(cd "$(dirname "$0")/.." && pwd)

log() { printf '\n[e2e] %s\n' "$*" >&2; }
die() {
    printf '[e2e] error: %s\n' "$*" >&2
    exit 1
}

[[ $# -eq 1 && -d $1 ]] || {
    awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" >&2
    exit 2
}
WHEEL_DIR=$(cd "$1" && pwd)

if [[ -n ${E2E_WORK:-} ]]; then
    W=$E2E_WORK
    mkdir -p "$W"
else
    W=$(mktemp -d "${TMPDIR:-/tmp}/fusedops-e2e.XXXXXX")
fi
W=$(cd "$W" && pwd)

PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    [[ -n ${E2E_WORK:-} ]] || rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Everything this run prints also goes to run.log: the password check at the
# end greps it, with the servers' and tools' logs. The tees ignore INT/TERM
# (timeout signals the whole group): they end when this shell does, so the
# cleanup above never writes into a closed pipe.
exec > >(trap '' INT TERM && exec tee -a "$W/run.log") \
    2> >(trap '' INT TERM && exec tee -a "$W/run.log" >&2)

RESULTS=()
NPASS=0
NFAIL=0
check_no() { printf '%02d' $((NPASS + NFAIL + 1)); }
record() { # PASS|FAIL DESCRIPTION
    local line
    line="$1 $(check_no) $2"
    if [[ $1 == PASS ]]; then NPASS=$((NPASS + 1)); else NFAIL=$((NFAIL + 1)); fi
    RESULTS+=("$line")
    printf '[e2e] %s\n' "$line" >&2
}
pass() { record PASS "$1"; }
fail() { record FAIL "$1"; }

# -- helpers --------------------------------------------------------------

# shellcheck source=tools/loopback.sh
source "$ROOT/tools/loopback.sh"

# METHOD URL [NETRC [BODY_OUT]]: print the HTTP status. Credentials, if any,
# come from the netrc file, never from the command line.
http_status() {
    python3 - "$@" <<'EOF'
import base64, netrc, sys, urllib.error, urllib.parse, urllib.request
method, url = sys.argv[1:3]
req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
if len(sys.argv) > 3:
    login, _, password = netrc.netrc(sys.argv[3]).authenticators(urllib.parse.urlsplit(url).hostname)
    token = base64.b64encode(f"{login}:{password}".encode()).decode()
    req.add_header("Authorization", f"Basic {token}")
body = b""
try:
    with urllib.request.urlopen(req, timeout=20) as r:
        code, body = r.status, r.read()
except urllib.error.HTTPError as e:
    code = e.code
if len(sys.argv) > 4:
    with open(sys.argv[4], "wb") as f:
        f.write(body)
print(code)
EOF
}

# "VARIANT VERSION" of a wheel (cpu X.Y.Z+cpu), from its METADATA.
wheel_info() {
    python3 - "$1" <<'EOF'
import sys, zipfile
from email.parser import BytesParser
with zipfile.ZipFile(sys.argv[1]) as zf:
    name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
    msg = BytesParser().parsebytes(zf.read(name), headersonly=True)
reqs = [r.replace(" ", "") for r in msg.get_all("Requires-Dist", [])]
assert any(r.startswith("torch>=") for r in reqs), f"{sys.argv[1]}: no torch>= requirement in {reqs}"
print(msg["Version"].partition("+")[2], msg["Version"])
EOF
}

# "VERSION CUDA" of the torch in a venv (CUDA "none" for a CPU build).
torch_info() {
    "$1/bin/python" -c 'import torch; print(torch.__version__, torch.version.cuda or "none")'
}
sha256() { sha256sum "$1" | cut -d' ' -f1; }

# A test venv holding the torch of SRC_VENV: SRC's site-packages, minus
# fusedops, hard-linked in (5 GB of CUDA torch in about a second, nothing
# written into SRC). pip and uv both see torch as installed there; uv does not
# follow .pth files, and a .pth would also show SRC's own fusedops to pip.
torch_venv() { # SRC_VENV DST
    local src=$1 dst=$2 from to entry
    "$src/bin/python" -m venv --without-pip "$dst"
    from=$("$src/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    to=$("$dst/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    for entry in "$from"/*; do
        case ${entry##*/} in fusedops | fusedops-*) continue ;; esac
        cp -al "$entry" "$to/" || die "cannot hard-link $from into $W: put E2E_WORK on its filesystem"
    done
    # pip comes from SRC's copy; without one, give the venv its own.
    "$dst/bin/python" -c 'import pip' 2>/dev/null || "$dst/bin/python" -m ensurepip --default-pip >/dev/null
}

quiet_pip() { # VENV ARGS...: pip, minus the noise about missing local mirrors
    local venv=$1 rc=0
    shift
    "$venv/bin/python" -m pip --disable-pip-version-check "$@" >"$W/pip.out" 2>&1 || rc=$?
    cat "$W/pip.out" >>"$W/pip.log"
    grep -v "is ignored: it is neither a file nor a directory" "$W/pip.out" >&2 || true
    return "$rc"
}

# pip with nothing but the command line: no pip.conf (extra indexes,
# find-links), no PIP_* index settings, no prompts; credentials from NETRC.
pip_only() { # NETRC VENV ARGS...
    local netrc=$1
    shift
    (
        unset PIP_FIND_LINKS PIP_EXTRA_INDEX_URL PIP_INDEX_URL PIP_CONSTRAINT PIP_KEYRING_PROVIDER
        export PIP_CONFIG_FILE=/dev/null NETRC=$netrc PIP_NO_INPUT=1
        quiet_pip "$@"
    )
}

# uv likewise: no uv.toml/pyproject, no UV_* index settings, its own cache.
uv_only() { # NETRC VENV ARGS...
    local netrc=$1 venv=$2 rc=0
    shift 2
    (
        unset UV_INDEX_URL UV_EXTRA_INDEX_URL UV_DEFAULT_INDEX UV_INDEX UV_FIND_LINKS UV_KEYRING_PROVIDER
        NETRC=$netrc UV_CACHE_DIR=$W/uv-cache UV_NO_PROGRESS=1 \
            "$W/tools/bin/uv" pip install --no-config --python "$venv/bin/python" "$@"
    ) >"$W/uv.out" 2>&1 || rc=$?
    cat "$W/uv.out" >>"$W/uv.log"
    cat "$W/uv.out" >&2
    return "$rc"
}

has_fusedops() { # VENV
    "$1/bin/python" -c 'import importlib.metadata as m; m.version("fusedops")' 2>/dev/null
}

SMOKE='import importlib.metadata, sys, torch, fusedops
want_version, want_prefix = sys.argv[1:3]
got = importlib.metadata.version("fusedops")
assert got == want_version, f"installed fusedops {got}, want {want_version}"
assert fusedops.__file__.startswith(want_prefix), f"fusedops from {fusedops.__file__}"
a = torch.randn(5, 3)
b = torch.randn(3)
assert torch.allclose(fusedops.add(a, b), a + b)
print("smoke ok: fusedops", fusedops.__version__, "torch", torch.__version__)'

smoke() { # NAME VENV VERSION: the installed fusedops is VERSION, from VENV, and works
    if "$2/bin/python" -c "$SMOKE" "$3" "$2/" && "$2/bin/python" -m fusedops info; then
        pass "$1"
    else
        fail "$1"
    fi
}

# Wrong-variant wheel forced in: import must fail with the loader's ImportError
# (not a dynamic-loader error) naming the torch, what is wrong, and the command
# that installs the right variant from its index. Then that command, with the
# wheel's baked-in index base URL swapped for this run's server, must install
# the right wheel: the loader and the index layout agree.
expect_import_error() { # NAME VENV TORCH WHY NEEDED_VARIANT BASE NETRC
    local name=$1 venv=$2 torch=$3 why=$4 needed=$5 base=$6 netrc=$7 out msg cmd want
    want=${VERSION[$needed]}
    if out=$("$venv/bin/python" -c 'import fusedops' 2>&1); then
        fail "$name (import succeeded)"
        return
    fi
    printf '%s\n' "$out" | tail -3 >&2
    # The message goes on over two lines (the install command).
    msg=$(printf '%s\n' "$out" | sed -n '/^ImportError/,$p')
    cmd=$(grep -oE 'pip install "fusedops==[^"]+" --index-url [^ ]+' <<<"$msg" | head -1 || true)
    if [[ -z $msg ]]; then
        fail "$name (no ImportError)"
    elif grep -qiE 'undefined symbol|cannot open shared object' <<<"$out"; then
        fail "$name (a dynamic-loader error: the check came too late)"
    elif ! grep -qF "torch $torch" <<<"$msg" || ! grep -qF "$why" <<<"$msg"; then
        fail "$name (the message does not name torch $torch and '$why')"
    elif [[ $cmd != "pip install \"fusedops==$want\" --index-url "*"/$needed/simple" ]]; then
        fail "$name (no command installing fusedops==$want from a $needed index: '$cmd')"
    elif pip_only "$netrc" "$venv" install --no-deps --force-reinstall "fusedops==$want" \
        --index-url "$base/$needed/simple/" && "$venv/bin/python" -c 'import fusedops' &&
        [[ $("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("fusedops"))') == "$want" ]]; then
        pass "$name; its command (index -> $base) installs $want"
    else
        fail "$name (its install command, on $base, did not give a working $want)"
    fi
}

# -- inputs ---------------------------------------------------------------

shopt -s nullglob
declare -A WHEEL=() VERSION=()
for w in "$WHEEL_DIR"/fusedops-*.whl; do
    read -r variant version < <(wheel_info "$w")
    [[ -z ${WHEEL[$variant]:-} ]] || die "two $variant wheels in $WHEEL_DIR"
    WHEEL[$variant]=$w
    VERSION[$variant]=$version
    log "$variant wheel: ${w##*/}"
done
[[ -n ${WHEEL[cpu]:-} ]] || die "no cpu fusedops wheel in $WHEEL_DIR"
VARIANTS=$(printf '%s\n' "${!WHEEL[@]}" | sort | tr '\n' ' ')
VARIANTS=${VARIANTS% }
CPU_WHEEL=${WHEEL[cpu]}
CPU_VERSION=${VERSION[cpu]}

# -- tools and torch venvs ------------------------------------------------

log "installing $PYPISERVER $BCRYPT $TWINE $UV (in the background)"
python3 -m venv "$W/tools"
"$W/tools/bin/python" -m pip install --quiet --disable-pip-version-check \
    "$PYPISERVER" "$BCRYPT" "$TWINE" "$UV" >"$W/tools-install.log" 2>&1 &
tools_pid=$!
PIDS+=("$tools_pid")

# The venv holding the torch of one kind ($1: cpu or cuda): $2 (an
# E2E_*_VENV) where given, else a new one with torch==$3 from pip's usual
# sources (pip.conf, find-links, PyPI: a CUDA torch's dependencies may only be
# there). Sets BASE_VENV.
base_torch_venv() {
    local kind=$1 reuse=$2 version=$3
    if [[ -n $reuse ]]; then
        BASE_VENV=$reuse
        log "[$kind] reusing torch from $BASE_VENV"
        return
    fi
    BASE_VENV=$W/torch-$kind
    log "[$kind] creating a torch $version venv"
    python3 -m venv "$BASE_VENV"
    quiet_pip "$BASE_VENV" install --quiet --no-compile "torch==$version" || die "cannot install torch $version"
}

base_torch_venv cpu "${E2E_CPU_VENV:-}" "${E2E_CPU_TORCH:-2.13.0}"
CPU_TORCH_VENV=$BASE_VENV
read -r CPU_TORCH cuda < <(torch_info "$CPU_TORCH_VENV")
[[ $cuda == none ]] || die "$CPU_TORCH_VENV: torch $CPU_TORCH is a CUDA $cuda build, not a CPU one"
log "[cpu] torch $CPU_TORCH"
CUDA=0
if [[ ${E2E_SKIP_CUDA:-0} != 1 ]]; then
    base_torch_venv cuda "${E2E_CUDA_VENV:-}" "${E2E_CUDA_TORCH:-2.14.1}"
    CUDA_TORCH_VENV=$BASE_VENV
    read -r CUDA_TORCH TORCH_CUDA < <(torch_info "$CUDA_TORCH_VENV")
    [[ $TORCH_CUDA != none ]] || die "$CUDA_TORCH_VENV: torch $CUDA_TORCH has no CUDA"
    CUDA_VARIANT=cu${TORCH_CUDA%%.*}
    log "[cuda] torch $CUDA_TORCH (CUDA $TORCH_CUDA) needs the $CUDA_VARIANT wheel"
    if [[ -n ${WHEEL[$CUDA_VARIANT]:-} ]]; then
        CUDA=1
        CUDA_VERSION=${VERSION[$CUDA_VARIANT]}
    else
        log "no $CUDA_VARIANT wheel in $WHEEL_DIR: the CUDA-torch cases are skipped"
    fi
fi
# A CUDA wheel for the wrong-variant cases: the CUDA torch's, else any.
WRONG=${CUDA_VARIANT:-}
[[ -n $WRONG && -n ${WHEEL[$WRONG]:-} ]] || WRONG=$(tr ' ' '\n' <<<"$VARIANTS" | grep -m1 '^cu' || true)
wait "$tools_pid" || {
    cat "$W/tools-install.log" >&2
    die "installing the tools failed"
}

# -- static index ---------------------------------------------------------

log "building the static index (one tree per variant: $VARIANTS)"
HTTP_PORT=$(free_port)
STATIC="http://127.0.0.1:$HTTP_PORT"
python3 "$ROOT/tools/make_index.py" "$WHEEL_DIR" "$W/site" --base-url "$STATIC"

python3 -m http.server --bind 127.0.0.1 --directory "$W/site" "$HTTP_PORT" \
    >"$W/http.log" 2>&1 &
PIDS+=($!)
wait_http "$STATIC/index.html"
log "static index at $STATIC"

log "[static] pip install --index-url $STATIC/cpu/simple (torch $CPU_TORCH)"
torch_venv "$CPU_TORCH_VENV" "$W/v-index"
if quiet_pip "$W/v-index" install fusedops --index-url "$STATIC/cpu/simple"; then
    smoke "static: pip --index-url cpu/simple installs $CPU_VERSION on torch $CPU_TORCH" "$W/v-index" "$CPU_VERSION"
else
    fail "static: pip --index-url cpu/simple installs $CPU_VERSION (pip failed)"
fi

log "[static] pip install -f $STATIC/cpu.html"
torch_venv "$CPU_TORCH_VENV" "$W/v-findlinks"
# -f on the command line would replace the configured find-links (where torch
# may come from), so add ours to them instead. The exact pin keeps a same-named
# project on another index out.
cfg_links=$("$W/v-findlinks/bin/python" -m pip config get global.find-links 2>/dev/null || true)
if PIP_FIND_LINKS="$STATIC/cpu.html ${PIP_FIND_LINKS:-$cfg_links}" \
    quiet_pip "$W/v-findlinks" install "fusedops==$CPU_VERSION"; then
    smoke "static: pip -f cpu.html (find-links page) installs $CPU_VERSION" "$W/v-findlinks" "$CPU_VERSION"
else
    fail "static: pip -f cpu.html installs $CPU_VERSION (pip failed)"
fi

log "[static] pip install --require-hashes"
torch_venv "$CPU_TORCH_VENV" "$W/v-hashes-static"
# torch is installed already, so only fusedops needs a hash.
echo "fusedops==$CPU_VERSION --hash=sha256:$(sha256 "$CPU_WHEEL")" >"$W/requirements.txt"
cat "$W/requirements.txt" >&2
if quiet_pip "$W/v-hashes-static" install --require-hashes -r "$W/requirements.txt" \
    --index-url "$STATIC/cpu/simple"; then
    smoke "static: pip --require-hashes installs $CPU_VERSION" "$W/v-hashes-static" "$CPU_VERSION"
else
    fail "static: pip --require-hashes installs $CPU_VERSION (pip failed)"
fi

log "[static] each variant's index offers its own variant only"
bad=
for variant in $VARIANTS; do
    for other in $VARIANTS; do
        [[ $other != "$variant" ]] || continue
        # That index alone (no pip.conf, no PyPI), the other variant's exact version.
        if pip_only /dev/null "$W/v-index" download --no-deps -d "$W/dl" \
            "fusedops==${VERSION[$other]}" --index-url "$STATIC/$variant/simple" >/dev/null 2>&1; then
            bad+=" $other-from-$variant"
        fi
    done
done
if [[ -z $bad ]]; then
    pass "static: no variant's index ($VARIANTS) offers another variant's wheel"
else
    fail "static: a variant's index offers another variant's wheel:$bad"
fi

if [[ -n $WRONG ]]; then
    log "[neg] forced --no-deps install of ${VERSION[$WRONG]} into the CPU torch $CPU_TORCH"
    torch_venv "$CPU_TORCH_VENV" "$W/v-wrong"
    quiet_pip "$W/v-wrong" install --quiet --no-deps \
        "$STATIC/$WRONG/wheels/$(basename "${WHEEL[$WRONG]}" | sed 's/+/%2B/g')"
    expect_import_error "neg: $WRONG wheel on CPU torch $CPU_TORCH fails at import with the loader's message" \
        "$W/v-wrong" "$CPU_TORCH" "is a CPU build" cpu "$STATIC" /dev/null
fi

if ((CUDA)); then
    log "[static/cuda] pip install --index-url $STATIC/$CUDA_VARIANT/simple (torch $CUDA_TORCH)"
    torch_venv "$CUDA_TORCH_VENV" "$W/v-cuda"
    if quiet_pip "$W/v-cuda" install fusedops --index-url "$STATIC/$CUDA_VARIANT/simple"; then
        smoke "static: pip --index-url $CUDA_VARIANT/simple installs $CUDA_VERSION on torch $CUDA_TORCH (no GPU needed)" \
            "$W/v-cuda" "$CUDA_VERSION"
    else
        fail "static: pip --index-url $CUDA_VARIANT/simple installs $CUDA_VERSION (pip failed)"
    fi
    log "[cpu on cuda] forced --no-deps install of $CPU_VERSION into torch $CUDA_TORCH"
    # A CPU wheel runs under any torch from the ABI target on; info says which
    # wheel CUDA tensors need.
    quiet_pip "$W/v-cuda" install --quiet --no-deps --force-reinstall "$CPU_WHEEL"
    : >"$W/info.out"
    if "$W/v-cuda/bin/python" -c "$SMOKE" "$CPU_VERSION" "$W/v-cuda/" >&2 &&
        "$W/v-cuda/bin/python" -m fusedops info >"$W/info.out" 2>&1 &&
        grep -qE "^NOTE: this cpu wheel runs here, but CUDA tensors need the $CUDA_VARIANT wheel" "$W/info.out"; then
        pass "cpu: $CPU_VERSION runs on CUDA torch $CUDA_TORCH; info names $CUDA_VARIANT for CUDA tensors"
    else
        fail "cpu: $CPU_VERSION on CUDA torch $CUDA_TORCH (import, or info's note, failed)"
    fi
    cat "$W/info.out" >&2
fi

# -- pypiserver behind a password file: one index per variant ------------------

log "pypiserver with a password file, one index per variant at <base>/<variant>/simple/"
USER_NAME=e2e
# Random, and never on a command line: it goes to the htpasswd hash on stdin,
# to the 0600 netrc file, and to twine through its environment.
PW=$(python3 -c 'import secrets; print(secrets.token_urlsafe(24))')
(
    umask 077
    "$W/tools/bin/python" -c '
import sys, bcrypt
user, out = sys.argv[1:3]
hashed = bcrypt.hashpw(sys.stdin.readline().rstrip("\n").encode(), bcrypt.gensalt(rounds=10))
with open(out, "w") as f:
    f.write(f"{user}:{hashed.decode()}\n")  # what htpasswd -B writes
' "$USER_NAME" "$W/htpasswd" <<<"$PW"
    printf 'machine 127.0.0.1\nlogin %s\npassword %s\n' "$USER_NAME" "$PW" >"$W/netrc"
    printf 'machine 127.0.0.1\nlogin %s\npassword %s\n' "$USER_NAME" "not-$PW-x" >"$W/netrc-wrong"
    : >"$W/empty.pypirc"
)
NETRC_OK=$W/netrc
NETRC_BAD=$W/netrc-wrong

# One pypiserver app per variant (its own package directory), each mounted at
# /<variant>/ of one server: the layout of the private index and of the
# install command the loader prints. Every app: -a download,list,update (every
# request needs the password), --disable-fallback (never redirect to PyPI), -v.
cat >"$W/serve.py" <<'EOF'
import sys
import pypiserver
from pypiserver import bottle_wrapper
from pypiserver.config import Config

port, htpasswd, top, *variants = sys.argv[1:]
root = bottle_wrapper.Bottle()
for variant in variants:
    config = Config.from_args(["run", "-v", "-i", "127.0.0.1", "-p", port, "-P", htpasswd,
                               "-a", "download,list,update", "--disable-fallback", f"{top}/{variant}"])
    app = pypiserver.setup_routes_from_config(pypiserver.app_from_config(config), config)
    root.mount(f"/{variant}/", app)
bottle_wrapper.run(app=root, host="127.0.0.1", port=int(port), server="auto", quiet=False)
EOF
PYPI_PORT=$(free_port)
PYPI="http://127.0.0.1:$PYPI_PORT"
for variant in $VARIANTS; do mkdir -p "$W/pypi-packages/$variant"; done
# shellcheck disable=SC2086 # one argument per variant
"$W/tools/bin/python" "$W/serve.py" "$PYPI_PORT" "$W/htpasswd" "$W/pypi-packages" $VARIANTS \
    >"$W/pypiserver.log" 2>&1 &
PIDS+=($!)
wait_http "$PYPI/cpu/simple/"
log "pypiserver at $PYPI/{${VARIANTS// /,}}/simple/"

stored() { find "$W/pypi-packages" -name '*.whl' | wc -l; }

twine_upload() { # twine, credentials only from the environment: each wheel to its variant's index
    local rc=0 variant
    : >"$W/twine.out"
    for variant in $VARIANTS; do
        PYTHON_KEYRING_BACKEND=keyring.backends.null.Keyring \
            "$W/tools/bin/twine" upload --non-interactive --disable-progress-bar \
            --config-file "$W/empty.pypirc" --repository-url "$PYPI/$variant/" "${WHEEL[$variant]}" \
            >>"$W/twine.out" 2>&1 || rc=$?
    done
    cat "$W/twine.out" >>"$W/twine.log"
    cat "$W/twine.out" >&2
    return "$rc"
}

log "[auth] upload without credentials"
codes=
for variant in $VARIANTS; do codes+=" $(http_status POST "$PYPI/$variant/")"; done
if [[ ${codes// 401/} == "" ]] &&
    ! (unset TWINE_USERNAME TWINE_PASSWORD && twine_upload) && (($(stored) == 0)); then
    pass "auth: upload without credentials refused (POST /<variant>/ ->$codes, twine fails, nothing stored)"
else
    fail "auth: upload without credentials refused (POST ->$codes, $(stored) stored)"
fi

log "[auth] upload with a wrong password"
if ! TWINE_USERNAME=$USER_NAME TWINE_PASSWORD="not-$PW-x" twine_upload &&
    grep -q '403' "$W/twine.out" && (($(stored) == 0)); then
    pass "auth: upload with a wrong password refused (403, nothing stored)"
else
    fail "auth: upload with a wrong password refused ($(stored) stored)"
fi

log "[auth] upload with TWINE_USERNAME/TWINE_PASSWORD"
placed=0
if TWINE_USERNAME=$USER_NAME TWINE_PASSWORD=$PW twine_upload; then
    placed=0
    for variant in $VARIANTS; do
        [[ -f $W/pypi-packages/$variant/${WHEEL[$variant]##*/} ]] && placed=$((placed + 1))
    done
fi
if ((placed == ${#WHEEL[@]} && $(stored) == ${#WHEEL[@]})); then
    pass "auth: twine upload with credentials from the environment stores each wheel in its variant's index ($VARIANTS)"
else
    fail "auth: twine upload with credentials ($(stored) stored, $placed in place)"
fi

log "[auth] anonymous and wrong-password reads"
codes=
for variant in $VARIANTS; do codes+=" $(http_status GET "$PYPI/$variant/simple/")"; done
if [[ ${codes// 401/} == "" ]]; then
    pass "auth: anonymous GET /<variant>/simple/ refused for every variant ($codes)"
else
    fail "auth: anonymous GET /<variant>/simple/ refused (got$codes)"
fi
code=$(http_status GET "$PYPI/cpu/simple/fusedops/")
ok=$(http_status GET "$PYPI/cpu/simple/fusedops/" "$NETRC_OK" "$W/listing.html")
if ((code == 401 && ok == 200)) && grep -qF "${CPU_WHEEL##*/}" "$W/listing.html" &&
    ! grep -qE 'fusedops-[^"]*\+cu[0-9]' "$W/listing.html"; then
    pass "auth: anonymous GET /cpu/simple/fusedops/ refused (401; 200 with the password, cpu wheel only)"
else
    fail "auth: anonymous GET /cpu/simple/fusedops/ refused (got $code; $ok with the password)"
fi
WHEEL_URL="$PYPI/cpu/packages/$(basename "$CPU_WHEEL" | sed 's/+/%2B/g')"
code=$(http_status GET "$WHEEL_URL")
ok=$(http_status GET "$WHEEL_URL" "$NETRC_OK" "$W/download.whl")
if ((code == 401 && ok == 200)) && [[ $(sha256 "$W/download.whl") == "$(sha256 "$CPU_WHEEL")" ]]; then
    pass "auth: anonymous wheel download refused (401; the same file with the password)"
else
    fail "auth: anonymous wheel download refused (got $code; $ok with the password)"
fi
code=$(http_status GET "$PYPI/cpu/simple/fusedops/" "$NETRC_BAD")
code2=$(http_status GET "$WHEEL_URL" "$NETRC_BAD")
if [[ $code == 40[13] && $code2 == 40[13] ]]; then
    pass "auth: wrong password refused for listing and download ($code, $code2)"
else
    fail "auth: wrong password refused for listing and download (got $code, $code2)"
fi

log "[auth] pip install with a wrong password in netrc"
torch_venv "$CPU_TORCH_VENV" "$W/v-pip"
# -vv: pip names the refused request only at debug level.
out=$(pip_only "$NETRC_BAD" "$W/v-pip" install -vv fusedops --index-url "$PYPI/cpu/simple/" 2>&1) && rc=0 || rc=$?
grep -E 'netrc|40[13] Client Error|^ERROR' <<<"$out" >&2 || true
if ((rc != 0)) && grep -q 'Found credentials in netrc' <<<"$out" &&
    grep -qE '40[13] Client Error' <<<"$out" && ! has_fusedops "$W/v-pip"; then
    pass "auth: pip with a wrong netrc password is refused"
else
    fail "auth: pip with a wrong netrc password is refused (rc=$rc)"
fi

# The netrc file is the only source of credentials below; --index-url is the
# variant's index on our server and nothing else (no extra index: dependency
# confusion), and the requirement is plain "fusedops".
[[ $(stat -c %a "$NETRC_OK") == 600 ]] || die "$NETRC_OK is not 0600"

log "[auth] pip + netrc, torch $CPU_TORCH, cpu index"
if pip_only "$NETRC_OK" "$W/v-pip" install fusedops --index-url "$PYPI/cpu/simple/"; then
    smoke "auth: pip (netrc, --index-url cpu only) installs $CPU_VERSION for torch $CPU_TORCH" "$W/v-pip" "$CPU_VERSION"
else
    fail "auth: pip (netrc, --index-url cpu only) installs $CPU_VERSION (pip failed)"
fi
if ((CUDA)); then
    log "[auth] pip + netrc, torch $CUDA_TORCH, $CUDA_VARIANT index"
    torch_venv "$CUDA_TORCH_VENV" "$W/v-pip-cuda"
    if pip_only "$NETRC_OK" "$W/v-pip-cuda" install fusedops --index-url "$PYPI/$CUDA_VARIANT/simple/"; then
        smoke "auth: pip (netrc, --index-url $CUDA_VARIANT only) installs $CUDA_VERSION for torch $CUDA_TORCH" \
            "$W/v-pip-cuda" "$CUDA_VERSION"
    else
        fail "auth: pip (netrc, --index-url $CUDA_VARIANT only) installs $CUDA_VERSION (pip failed)"
    fi
    # Another CUDA major's wheel (cu12 under a CUDA 13 torch), from its index.
    for other in $VARIANTS; do
        [[ $other == cu* && $other != "$CUDA_VARIANT" ]] || continue
        log "[auth/neg] $other wheel from its index into torch $CUDA_TORCH"
        torch_venv "$CUDA_TORCH_VENV" "$W/v-wrong-$other"
        pip_only "$NETRC_OK" "$W/v-wrong-$other" install --quiet --no-deps fusedops \
            --index-url "$PYPI/$other/simple/" || true
        expect_import_error "auth/neg: $other wheel on torch $CUDA_TORCH (CUDA $TORCH_CUDA) fails at import" \
            "$W/v-wrong-$other" "$CUDA_TORCH" "CUDA major" "$CUDA_VARIANT" "$PYPI" "$NETRC_OK"
    done
fi
if [[ -n $WRONG ]]; then
    log "[auth/neg] $WRONG wheel from its index into the CPU torch $CPU_TORCH"
    torch_venv "$CPU_TORCH_VENV" "$W/v-wrong-auth"
    pip_only "$NETRC_OK" "$W/v-wrong-auth" install --quiet --no-deps fusedops \
        --index-url "$PYPI/$WRONG/simple/" || true
    expect_import_error "auth/neg: $WRONG wheel on CPU torch $CPU_TORCH fails at import" \
        "$W/v-wrong-auth" "$CPU_TORCH" "is a CPU build" cpu "$PYPI" "$NETRC_OK"
fi

log "[auth] uv with a wrong password in netrc"
torch_venv "$CPU_TORCH_VENV" "$W/v-uv"
if ! uv_only "$NETRC_BAD" "$W/v-uv" fusedops --default-index "$PYPI/cpu/simple/" &&
    grep -qE '40[13]' "$W/uv.out" && ! has_fusedops "$W/v-uv"; then
    pass "auth: uv with a wrong netrc password is refused"
else
    fail "auth: uv with a wrong netrc password is refused"
fi

# uv keeps the installed torch (it satisfies torch>=2.10), so no --no-deps.
log "[auth] uv + netrc, torch $CPU_TORCH, cpu index"
if uv_only "$NETRC_OK" "$W/v-uv" fusedops --default-index "$PYPI/cpu/simple/" &&
    ! grep -qE '^ [-+] torch' "$W/uv.out"; then
    smoke "auth: uv (netrc, --default-index cpu only) installs $CPU_VERSION for torch $CPU_TORCH" "$W/v-uv" "$CPU_VERSION"
else
    fail "auth: uv (netrc, --default-index cpu only) installs $CPU_VERSION (uv failed or touched torch)"
fi
if ((CUDA)); then
    log "[auth] uv + netrc, torch $CUDA_TORCH, $CUDA_VARIANT index"
    torch_venv "$CUDA_TORCH_VENV" "$W/v-uv-cuda"
    if uv_only "$NETRC_OK" "$W/v-uv-cuda" fusedops --default-index "$PYPI/$CUDA_VARIANT/simple/" &&
        ! grep -qE '^ [-+] torch' "$W/uv.out"; then
        smoke "auth: uv (netrc, --default-index $CUDA_VARIANT only) installs $CUDA_VERSION for torch $CUDA_TORCH" \
            "$W/v-uv-cuda" "$CUDA_VERSION"
    else
        fail "auth: uv (netrc, --default-index $CUDA_VARIANT only) installs $CUDA_VERSION (uv failed or touched torch)"
    fi
fi

log "[auth] pip --require-hashes"
torch_venv "$CPU_TORCH_VENV" "$W/v-hashes"
# requirements.txt (above) pins the original cpu wheel's sha256.
if pip_only "$NETRC_OK" "$W/v-hashes" install --require-hashes -r "$W/requirements.txt" \
    --index-url "$PYPI/cpu/simple/"; then
    smoke "auth: pip --require-hashes installs $CPU_VERSION" "$W/v-hashes" "$CPU_VERSION"
else
    fail "auth: pip --require-hashes installs $CPU_VERSION (pip failed)"
fi

log "[auth] a tampered wheel under the original name"
# A valid wheel with one changed line: only its hash gives it away.
stored_cpu=$W/pypi-packages/cpu/${CPU_WHEEL##*/}
python3 - "$CPU_WHEEL" "$stored_cpu.tmp" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as src, zipfile.ZipFile(sys.argv[2], "w", zipfile.ZIP_DEFLATED) as dst:
    for info in src.infolist():
        data = src.read(info)
        if info.filename == "fusedops/__init__.py":
            data += b"\nTAMPERED = True\n"
        dst.writestr(info, data)
EOF
mv -f "$stored_cpu.tmp" "$stored_cpu"
torch_venv "$CPU_TORCH_VENV" "$W/v-tampered"
served=$(http_status GET "$WHEEL_URL" "$NETRC_OK" "$W/download.whl")
out=$(pip_only "$NETRC_OK" "$W/v-tampered" install --no-cache-dir --require-hashes \
    -r "$W/requirements.txt" --index-url "$PYPI/cpu/simple/" 2>&1) && rc=0 || rc=$?
if ((served == 200)) && [[ $(sha256 "$W/download.whl") == "$(sha256 "$stored_cpu")" ]] &&
    ((rc != 0)) && grep -q 'DO NOT MATCH THE HASHES' <<<"$out" &&
    grep -qF "$(sha256 "$stored_cpu")" <<<"$out" && ! has_fusedops "$W/v-tampered"; then
    pass "auth: a tampered wheel served under the original name fails --require-hashes"
else
    fail "auth: a tampered wheel fails --require-hashes (served=$served rc=$rc)"
fi

log "[auth] the password in logs"
leaks=$(grep -lF -- "$PW" "$W"/*.log "$W"/*.out "$W"/*.html 2>/dev/null || true)
if [[ -z $leaks ]] && [[ $(stat -c %a "$NETRC_OK") == 600 ]]; then
    pass "auth: the password appears in no log or output of this run (netrc 0600)"
else
    fail "auth: the password leaked into: ${leaks:-<none>} (netrc mode $(stat -c %a "$NETRC_OK"))"
fi

# -- summary --------------------------------------------------------------

printf '\n[e2e] summary\n' >&2
for line in "${RESULTS[@]}"; do printf '  %s\n' "$line" >&2; done
echo "e2e_index_test: $NPASS passed, $NFAIL failed"
((NFAIL == 0))
