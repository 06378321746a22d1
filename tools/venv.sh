#!/usr/bin/env bash
# tools/venv.sh — prepare the Python venv for clients/python and print its
# interpreter path on stdout (progress goes to stderr).
#
# Venv: ${QUEEN_VENV:-<repo>/.venv}, reused when present; queen-mq is installed
# from PyPI (clients/python/requirements.txt) unless the pinned version is there.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${QUEEN_VENV:-$ROOT/.venv}
REQ="$ROOT/clients/python/requirements.txt"
PIN=$(sed -n 's/^queen-mq==\([^[:space:]]*\).*/\1/p' "$REQ")

log() { echo "venv.sh: $*" >&2; }

if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating venv $VENV (python3 -m venv)"
    python3 -m venv "$VENV" >&2 || {
        log "python3 -m venv failed (Debian: apt-get install python3-venv)"
        exit 1
    }
fi

if ! "$VENV/bin/python" - "$PIN" >/dev/null 2>&1 <<'EOF'; then
import sys
from importlib.metadata import version
import queen  # noqa: F401
sys.exit(0 if version("queen-mq") == sys.argv[1] else 1)
EOF
    log "installing $(grep -v '^#' "$REQ" | tr '\n' ' ')from PyPI into $VENV"
    "$VENV/bin/python" -m pip install --disable-pip-version-check -q -r "$REQ" >&2
fi

echo "$VENV/bin/python"
