#!/usr/bin/env bash
# Validates tools/cibuildwheel.toml without docker: its JSON schema (value
# types), then cibuildwheel's own build selection, bare and with each wheel
# variant's environment as wheels.yml passes it, and the `environment` option
# as before-all and the build see it (tools/check_cibuildwheel_env.py). Needs
# python (with cibuildwheel installed), cibuildwheel on PATH, and root or sudo.
# Run by .ci/run and ci.yml.
set -euo pipefail
cd "$(dirname "$0")/.."

python - <<'PY'
import json, tomllib, jsonschema
from importlib.resources import files
schema = json.loads(files("cibuildwheel").joinpath("resources", "cibuildwheel.schema.json").read_text())
with open("tools/cibuildwheel.toml", "rb") as f:
    config = tomllib.load(f)["tool"]["cibuildwheel"]
jsonschema.validate(config, schema)
print("tools/cibuildwheel.toml matches cibuildwheel's schema")
# The images are the matrix's manylinux: repair_wheel.sh's default platform.
manylinux = json.load(open("tools/wheel_matrix.json"))["manylinux"]
for arch in ("x86_64", "aarch64"):
    if config[f"manylinux-{arch}-image"] != manylinux:
        raise SystemExit(f"manylinux-{arch}-image is {config[f'manylinux-{arch}-image']}, the matrix's {manylinux}")
PY
# One build per (variant, platform) entry of the matrix, as a runner of that
# platform sees it (--archs: what "native" is there).
entries=$(python tools/wheel_matrix.py --github --platform all |
  python -c 'import json, sys; print(*(":".join((e["variant"], e["platform"], e["cibw_build"])) for e in json.load(sys.stdin)["include"]))')
for entry in $entries; do
  IFS=: read -r variant platform want <<< "$entry"
  env_lines=$(python tools/wheel_matrix.py --variant "$variant" --platform "$platform" --format env)
  mapfile -t vars <<< "$env_lines"
  got=$(env "${vars[@]}" cibuildwheel --print-build-identifiers --platform linux --archs "$platform" \
    --config-file tools/cibuildwheel.toml)
  [ "$got" = "$want" ] || { echo "$variant on $platform: cibuildwheel selects '$got', not $want" >&2; exit 1; }
  echo "cibuildwheel $variant on $platform: $got"
done
# The environment as cibuildwheel evaluates it before before-all (no toolkit yet)
# and before the build (host-cxx written): tools/check_cibuildwheel_env.py. The
# build state needs /opt/fusedops-cuda/host-cxx: a private mount namespace with
# an overlay over /opt (its content, python's on GitHub runners included, stays
# visible), as root or with sudo, so nothing on this machine changes.
python tools/check_cibuildwheel_env.py before-all
fake_cxx=/opt/rh/gcc-toolset-13/root/usr/bin/g++
overlay=$(mktemp -d)
trap 'rmdir "$overlay"' EXIT
# The overlay's own directories on a tmpfs of the namespace: gone with it.
build_state="mount -t tmpfs none $overlay && mkdir $overlay/upper $overlay/work &&
  mount -t overlay overlay -o lowerdir=/opt,upperdir=$overlay/upper,workdir=$overlay/work /opt &&
  mkdir /opt/fusedops-cuda && echo $fake_cxx > /opt/fusedops-cuda/host-cxx &&
  $(command -v python) tools/check_cibuildwheel_env.py build $fake_cxx"
if [ "$(id -u)" = 0 ]; then
  unshare --mount --propagation private sh -c "$build_state"
elif sudo -n true 2>/dev/null; then
  sudo -n unshare --mount --propagation private sh -c "$build_state"
else
  echo "check_cibuildwheel_config: the build-state check needs root or sudo for a mount namespace" >&2
  exit 1
fi
