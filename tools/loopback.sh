# shellcheck shell=bash
# Sourced by the scripts that serve an index on 127.0.0.1 (e2e_index_test.sh,
# release_rehearsal.sh, aarch64/index_test.sh): a free port, and waiting for a
# server to answer.

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_http() { # URL: poll up to 30 s; any HTTP answer (401 too) means it is up
    python3 - "$1" <<'PY'
import sys, time, urllib.error, urllib.request
for _ in range(60):
    try:
        urllib.request.urlopen(sys.argv[1], timeout=2).close()
        sys.exit(0)
    except urllib.error.HTTPError:
        sys.exit(0)
    except OSError:
        time.sleep(0.5)
sys.exit(f"no answer from {sys.argv[1]}")
PY
}
