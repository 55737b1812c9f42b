#!/usr/bin/env bash
# One variant's index serving an aarch64 wheel beside the x86-64 one (the
# private index: pypiserver with a password file, on 127.0.0.1 only), and pip
# taking each platform's own by its tags: the host's pip (x86-64), the host's
# pip asked for aarch64 (--platform), and pip itself running as aarch64 code
# under qemu (the platform it detects).
#
#   tools/aarch64/index_test.sh X86_64_WHEEL AARCH64_WHEEL ARM64_ROOT
#
# ARM64_ROOT: tools/aarch64/arm64_root.sh's root. Both wheels are one release
# of one variant (fusedops-V+cpu-...). Needs PyPI (pypiserver, pip's wheel).
set -euo pipefail
cd "$(dirname "$0")/../.."

[ $# -eq 3 ] || { sed -n '2,11s/^# \{0,1\}//p' "$0" >&2; exit 2; }
x86=$(realpath "$1") arm=$(realpath "$2") root=$(realpath "$3")
version=$(basename "$x86" | cut -d- -f2)
[ "$(basename "$arm" | cut -d- -f2)" = "$version" ] || { echo "index_test: $x86 and $arm are not one release" >&2; exit 2; }
w=$(mktemp -d)
server=
# shellcheck disable=SC2329 # run by the EXIT trap
cleanup() { if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; fi; rm -rf "$w"; }
trap cleanup EXIT

python3 -m venv "$w/tools"
# The pins tools/e2e_index_test.sh uses (bcrypt 4.0.1: passlib 1.7.4 breaks on newer ones).
"$w/tools/bin/pip" install -q 'pypiserver[passlib]==2.4.2' bcrypt==4.0.1 2>&1 | { grep -v 'is ignored' || true; }
python3 -m pip download -q --no-deps -d "$w/pip" pip==25.3 2>&1 | { grep -v 'is ignored' || true; }
mkdir -p "$w/packages" "$w/x86" "$w/arm" "$w/qemu"
cp "$x86" "$arm" "$w/packages/"

# A random password, only in the bcrypt hash and a 0600 netrc (never on a command line).
password=$(python3 -c 'import secrets; print(secrets.token_urlsafe(24))')
(
  umask 077
  "$w/tools/bin/python" -c '
import sys, bcrypt
hashed = bcrypt.hashpw(sys.stdin.readline().rstrip("\n").encode(), bcrypt.gensalt(rounds=10))
open(sys.argv[1], "w").write(f"ci:{hashed.decode()}\n")' "$w/htpasswd" <<<"$password"
  printf 'machine 127.0.0.1\nlogin ci\npassword %s\n' "$password" >"$w/netrc"
)
# shellcheck source=tools/loopback.sh
source tools/loopback.sh
port=$(free_port)
"$w/tools/bin/pypi-server" run -i 127.0.0.1 -p "$port" -P "$w/htpasswd" -a download,list,update \
  --disable-fallback "$w/packages" >"$w/server.log" 2>&1 &
server=$!
index=http://127.0.0.1:$port/simple/
wait_http "$index"

fetch() { # DEST host|qemu [OPTION...]: pip download of this release from the index into DEST, credentials from the netrc
  local dest=$1 pip=(python3 -m pip)
  [ "$2" = host ] || pip=(env QEMU_LD_PREFIX="$root" QEMU_CPU=neoverse-n1 "$root/usr/bin/python3.11" "$w/pip/pip-25.3-py3-none-any.whl/pip")
  shift 2
  NETRC=$w/netrc PIP_CONFIG_FILE=/dev/null PIP_FIND_LINKS='' PIP_CONSTRAINT='' "${pip[@]}" download --no-deps \
    --disable-pip-version-check -q --index-url "$index" -d "$dest" "$@" "fusedops==$version"
}
failed=0
expect() { # DEST WHEEL WHAT
  local got
  got=$(find "$1" -name '*.whl' -printf '%f\n')
  if [ "$got" = "$(basename "$2")" ]; then echo "index_test: ok: $3 took $got"; else
    echo "index_test: FAIL: $3 took '${got:-nothing}', not $(basename "$2")" >&2
    failed=1
  fi
}

# The index is private: no credentials, no listing.
if NETRC=/dev/null PIP_CONFIG_FILE=/dev/null PIP_FIND_LINKS='' python3 -m pip download --no-deps -q \
  --disable-pip-version-check --no-input --index-url "$index" -d "$w/none" "fusedops==$version" 2>/dev/null; then
  echo "index_test: FAIL: pip downloaded without credentials" >&2
  failed=1
else
  echo "index_test: ok: without credentials pip gets nothing"
fi
fetch "$w/x86" host
expect "$w/x86" "$x86" "the host's pip (x86-64)"
# The release's aarch64 wheels are manylinux_2_28 (built natively in that
# container); the one cross-built here is tagged for the cross glibc
# (manylinux_2_34): ask for what a glibc 2.34 aarch64 system takes.
fetch "$w/arm" host --only-binary=:all: --python-version 3.10 --platform manylinux_2_34_aarch64 \
  --platform manylinux_2_28_aarch64
expect "$w/arm" "$arm" "the host's pip with --platform manylinux_2_34_aarch64"
fetch "$w/qemu" qemu
expect "$w/qemu" "$arm" "pip under qemu (aarch64, glibc 2.36)"
exit "$failed"
