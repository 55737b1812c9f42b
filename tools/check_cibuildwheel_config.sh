#!/usr/bin/env bash
# Validates tools/cibuildwheel.toml without docker: its JSON schema (value
# types), then cibuildwheel's own build selection, bare and with each wheel
# variant's environment as wheels.yml passes it. Needs python (with
# cibuildwheel installed) and cibuildwheel on PATH. Run by .ci/run and ci.yml.
set -euo pipefail
cd "$(dirname "$0")/.."

python - <<'PY'
import json, tomllib, jsonschema
from importlib.resources import files
schema = json.loads(files("cibuildwheel").joinpath("resources", "cibuildwheel.schema.json").read_text())
with open("tools/cibuildwheel.toml", "rb") as f:
    jsonschema.validate(tomllib.load(f)["tool"]["cibuildwheel"], schema)
print("tools/cibuildwheel.toml matches cibuildwheel's schema")
PY
want=cp310-manylinux_x86_64
got=$(cibuildwheel --print-build-identifiers --platform linux --config-file tools/cibuildwheel.toml)
[ "$got" = "$want" ] || { echo "cibuildwheel selects '$got', not $want" >&2; exit 1; }
variants=$(python tools/wheel_matrix.py --github |
  python -c 'import json, sys; print(*(e["variant"] for e in json.load(sys.stdin)["include"]))')
for variant in $variants; do
  env_lines=$(python tools/wheel_matrix.py --variant "$variant" --format env)
  mapfile -t vars <<< "$env_lines"
  got=$(env "${vars[@]}" cibuildwheel --print-build-identifiers --platform linux --config-file tools/cibuildwheel.toml)
  [ "$got" = "$want" ] || { echo "$variant: cibuildwheel selects '$got', not $want" >&2; exit 1; }
  echo "cibuildwheel $variant: $got"
done
