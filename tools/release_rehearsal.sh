#!/usr/bin/env bash
# Rehearse a release on this machine with the scripts wheels.yml runs, in its
# order, on wheels that are built already, so that what breaks on a tag breaks
# here first (loopback only):
#
#   tools/release_rehearsal.sh WHEEL_DIR [WHEEL_DIR ...]
#
#  1. build: the repaired wheels' checks again (repair_wheel.sh --check), one per
#     (variant, platform), and their sha256 recorded as the build job records them;
#  2. test: the hash-pinned test tools install (--require-hashes --no-deps), and
#     the copies tested are the recorded ones;
#  3. attest: the hash-pinned pypi-attestations installs and passes
#     tests/test_attestations.py (local key); signing needs Fulcio and Rekor, so
#     each wheel gets an unsigned stand-in attestation of the same shape (its
#     name and sha256 in an in-toto statement) in its slot;
#  4. index: make_index.py with provenance, then index_no_loss.py against a live
#     index on 127.0.0.1, and check_deploy.py on it once deployed (at another
#     URL than the wheels': refused): the first deploy, a re-run of the tag with the
#     released assets renamed the way GitHub renames them, and a tampered wheel
#     (must fail);
#  5. private index: pypiserver with a password, one index per variant (both
#     platforms' wheels of a variant in it);
#     private_index.py, hash-pinned twine uploads each wheel to its variant,
#     private_index.py again finds them all identical.
#
# Env: REHEARSAL_WORK (work dir, kept; default a temp dir, removed at exit).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYPISERVER='pypiserver[passlib]==2.4.2'
BCRYPT=bcrypt==4.0.1 # as tools/e2e_index_test.sh: passlib 1.7.4 needs bcrypt < 4.1
REPO=fusedops/rehearsal

log() { printf '[rehearsal] %s\n' "$*" >&2; }
die() {
    log "FAILED: $*"
    exit 1
}
usage() {
    awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" >&2
    exit 2
}
(($# > 0)) || usage
WHEEL_DIRS=()
for dir in "$@"; do
    [[ -d $dir ]] || usage
    WHEEL_DIRS+=("$(cd "$dir" && pwd)")
done
cd "$ROOT"
if [[ -n ${REHEARSAL_WORK:-} ]]; then
    W=$REHEARSAL_WORK
    mkdir -p "$W"
else
    W=$(mktemp -d "${TMPDIR:-/tmp}/fusedops-rehearsal.XXXXXX")
fi
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    [[ -n ${REHEARSAL_WORK:-} ]] || rm -rf "$W"
}
trap cleanup EXIT
# shellcheck source=tools/loopback.sh
source "$ROOT/tools/loopback.sh"
venv() { # DIR REQUIREMENTS: a venv with a hash-pinned requirements file installed
    python3 -m venv "$1"
    "$1/bin/python" -m pip install -q --disable-pip-version-check --require-hashes --no-deps -r "$2" 2>&1 |
        { grep -v 'is ignored: it is neither a file nor a directory' || true; }
}

log "1. build: checks of the repaired wheels, sha256 recorded"
shopt -s nullglob
wheels=()
for dir in "${WHEEL_DIRS[@]}"; do wheels+=("$dir"/fusedops-*.whl); done
((${#wheels[@]} > 0)) || die "no fusedops wheels in ${WHEEL_DIRS[*]}"
mkdir -p "$W/dist/new" "$W/sha256"
variants=()
for wheel in "${wheels[@]}"; do
    variant=$(sed -E 's/^fusedops-[^+-]+\+([a-z0-9]+)-.*/\1/' <<<"${wheel##*/}")
    platform=$(sed -E 's/.*_(x86_64|aarch64)\.whl$/\1/' <<<"${wheel##*/}")
    # wheels.yml's build job: one sha256 record per (variant, platform).
    [[ ! -e $W/sha256/$variant-$platform.sha256 ]] || die "two $variant wheels for $platform in ${WHEEL_DIRS[*]}"
    [[ " ${variants[*]} " == *" $variant "* ]] || variants+=("$variant")
    tools/repair_wheel.sh --check "$wheel"
    cp "$wheel" "$W/dist/new/"
    (cd "$W/dist/new" && sha256sum -- "${wheel##*/}") >"$W/sha256/$variant-$platform.sha256"
done
cat "$W/sha256"/*.sha256 >&2

log "2. test: hash-pinned test tools; the copies are the recorded wheels"
venv "$W/test-tools" "$ROOT/tools/requirements/test.txt"
"$W/test-tools/bin/python" -m pytest --version
(cd "$W/dist/new" && sha256sum --strict -c "$W"/sha256/*.sha256)

log "3. attest: hash-pinned pypi-attestations; unsigned stand-ins in the attestation slots"
venv "$W/attest-tools" "$ROOT/tools/requirements/attest.txt"
"$W/attest-tools/bin/pypi-attestations" --version
# Signing and verifying offline with a local key (tests/test_attestations.py); its
# pytest from the test tools (same pins where the two files overlap).
"$W/attest-tools/bin/python" -m pip install -q --disable-pip-version-check --require-hashes --no-deps \
    -r "$ROOT/tools/requirements/test.txt" 2>&1 | { grep -v 'is ignored: it is neither a file nor a directory' || true; }
"$W/attest-tools/bin/python" -m pytest -q -p no:cacheprovider --noconftest "$ROOT/tests/test_attestations.py"
(cd "$W/dist/new" && sha256sum --strict -c "$W"/sha256/*.sha256)
"$W/attest-tools/bin/python" - "$W/dist/new" <<'EOF'
import base64, hashlib, json, sys
from pathlib import Path
for wheel in sorted(Path(sys.argv[1]).glob("*.whl")):
    statement = {"_type": "https://in-toto.io/Statement/v1",
                 "predicateType": "https://docs.pypi.org/attestations/publish/v1",
                 "subject": [{"name": wheel.name, "digest": {"sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()}}]}
    stand_in = {"version": 1, "verification_material": {"certificate": "", "transparency_entries": [{}]},
                "envelope": {"statement": base64.b64encode(json.dumps(statement).encode()).decode(), "signature": ""}}
    Path(f"{wheel}.publish.attestation").write_text(json.dumps(stand_in))
EOF

log "4. index: make_index.py, index_no_loss.py against a live index on 127.0.0.1"
LIVE_PORT=$(free_port)
LIVE="http://127.0.0.1:$LIVE_PORT"
mkdir -p "$W/live" "$W/dist/old"
python3 -m http.server --bind 127.0.0.1 --directory "$W/live" "$LIVE_PORT" >"$W/http.log" 2>&1 &
PIDS+=($!)
wait_http "$LIVE/"
rmdir "$W/live" # 404 at the top: the first deploy
python3 "$ROOT/tools/make_index.py" "$W/dist" "$W/site" --base-url "$LIVE" --github-repository "$REPO"
python3 "$ROOT/tools/index_no_loss.py" "$LIVE" "$W/dist/old" "$W/dist/new" "$W/site" --allow-http-loopback
mv "$W/site" "$W/live" # deployed
# The release leaves draft only when the deployed index serves the new wheels at the URL they carry.
python3 "$ROOT/tools/check_deploy.py" "$LIVE/" "$W/dist/new" --index-url "$LIVE" --allow-http-loopback --wait 0
if python3 "$ROOT/tools/check_deploy.py" "$LIVE/moved/" "$W/dist/new" --index-url "$LIVE" --allow-http-loopback \
    --wait 0 2>"$W/moved.err"; then
    die "check_deploy.py published a release whose index is not where its wheels point"
fi
# A re-run of the same tag: its release holds the assets, renamed by GitHub ('+' -> '.').
mkdir -p "$W/dist/old/v-rehearsal"
for file in "$W/dist/new"/*; do
    name=${file##*/}
    cp "$file" "$W/dist/old/v-rehearsal/${name/+/.}"
done
python3 "$ROOT/tools/make_index.py" "$W/dist" "$W/site2" --base-url "$LIVE" --github-repository "$REPO"
python3 "$ROOT/tools/index_no_loss.py" "$LIVE" "$W/dist/old" "$W/dist/new" "$W/site2" --allow-http-loopback
grep -c 'data-provenance=' "$W"/site2/*/simple/fusedops/index.html >&2
# A new build of a released name with other bytes must be refused.
cp -r "$W/dist/new" "$W/tampered"
tampered=("$W"/tampered/fusedops-*+cpu-*.whl) # one of them (a cpu wheel per platform)
printf '\0' >>"${tampered[0]}"
rm "$W"/tampered/*.publish.attestation
if python3 "$ROOT/tools/index_no_loss.py" "$LIVE" "$W/dist/old" "$W/tampered" "$W/site2" \
    --allow-http-loopback 2>"$W/tampered.err"; then
    die "index_no_loss.py accepted a changed wheel under a released name"
fi
grep -F 'released before with other content' "$W/tampered.err" >&2

log "5. private index: pypiserver (password), private_index.py, hash-pinned twine"
venv "$W/twine" "$ROOT/tools/requirements/twine.txt"
python3 -m venv "$W/server"
"$W/server/bin/python" -m pip install -q --disable-pip-version-check "$PYPISERVER" "$BCRYPT" 2>&1 |
    { grep -v 'is ignored: it is neither a file nor a directory' || true; }
PW=$(python3 -c 'import secrets; print(secrets.token_urlsafe(24))')
(
    umask 077
    "$W/server/bin/python" -c '
import sys, bcrypt
print(f"rehearsal:{bcrypt.hashpw(sys.stdin.readline().strip().encode(), bcrypt.gensalt(rounds=10)).decode()}")
' <<<"$PW" >"$W/htpasswd"
)
cat >"$W/serve.py" <<'EOF'
import sys
import pypiserver
from pypiserver import bottle_wrapper
from pypiserver.config import Config

port, htpasswd, top, *variants = sys.argv[1:]
root = bottle_wrapper.Bottle()
for variant in variants:
    config = Config.from_args(["run", "-i", "127.0.0.1", "-p", port, "-P", htpasswd,
                               "-a", "download,list,update", "--disable-fallback", f"{top}/{variant}"])
    root.mount(f"/{variant}/", pypiserver.setup_routes_from_config(pypiserver.app_from_config(config), config))
bottle_wrapper.run(app=root, host="127.0.0.1", port=int(port), server="auto", quiet=True)
EOF
for variant in "${variants[@]}"; do mkdir -p "$W/packages/$variant"; done
PYPI_PORT=$(free_port)
"$W/server/bin/python" "$W/serve.py" "$PYPI_PORT" "$W/htpasswd" "$W/packages" "${variants[@]}" >"$W/pypiserver.log" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$PYPI_PORT/cpu/simple/"
export FUSEDOPS_INDEX_URL="http://127.0.0.1:$PYPI_PORT" TWINE_USERNAME=rehearsal TWINE_PASSWORD=$PW
"$W/twine/bin/twine" check --strict "$W"/dist/new/*.whl
python3 "$ROOT/tools/private_index.py" "$W/dist/new" "$W/to-upload" --allow-http-loopback
[[ $(wc -l <"$W/to-upload") -eq ${#wheels[@]} ]] || die "expected every wheel in $W/to-upload"
while read -r variant wheel; do
    PYTHON_KEYRING_BACKEND=keyring.backends.null.Keyring "$W/twine/bin/twine" upload --non-interactive \
        --disable-progress-bar --repository-url "${FUSEDOPS_INDEX_URL%/}/$variant/" "$wheel"
done <"$W/to-upload"
python3 "$ROOT/tools/private_index.py" "$W/dist/new" "$W/to-upload" --allow-http-loopback
[[ ! -s $W/to-upload ]] || die "private_index.py still wants to upload: $(cat "$W/to-upload")"
log "OK: ${#wheels[@]} wheel(s) through build checks, test tools, attestation slots, index, private index"
