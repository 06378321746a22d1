#!/usr/bin/env bash
# tools/run.sh — build and run the Queen broker.
#
# PG_HOST unset: start (or reuse) a private PostgreSQL cluster under
#   ${QUEEN_DATA_DIR:-<repo>/.queen-data}/pg on 127.0.0.1:${QUEEN_PG_PORT:-6543}
#   and point the broker at it (PG_HOST/PG_PORT/PG_USER/PG_DB are exported).
# PG_HOST set (any value, even localhost): connect there; no cluster is started.
# FILE_BUFFER_DIR defaults to ${QUEEN_DATA_DIR}/spool.
# All other broker settings come from the environment (see README, Configuration).
# QUEEN_SKIP_BUILD=1 skips `cargo build --release`.
#
# The cluster keeps running after the broker exits; stop it with
#   tools/pg.sh stop .queen-data/pg
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# QUEEN_DATA_DIR is relative to the caller's directory; default inside the repo.
DATA_DIR=${QUEEN_DATA_DIR:-$ROOT/.queen-data}
case "$DATA_DIR" in /*) ;; *) DATA_DIR="$PWD/$DATA_DIR" ;; esac
DATA_DIR=$(realpath -m -- "$DATA_DIR")

cd "$ROOT"

if [[ "${QUEEN_SKIP_BUILD:-0}" != 1 ]]; then
    echo "run.sh: building the broker (cargo build --release)"
    cargo build --release
fi
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/queen"
[[ -x "$BIN" ]] || { echo "run.sh: $BIN not found; did the build succeed?" >&2; exit 1; }

if [[ -z "${PG_HOST+set}" ]]; then
    PG_PORT_PRIVATE=${QUEEN_PG_PORT:-6543}
    mkdir -p "$DATA_DIR"
    # As root, PostgreSQL runs as user postgres, which must reach $DATA_DIR/pg.
    if [[ $(id -u) -eq 0 ]]; then chmod o+x "$DATA_DIR" 2>/dev/null || true; fi
    "$ROOT/tools/pg.sh" start "$DATA_DIR/pg" "$PG_PORT_PRIVATE"
    export PG_HOST=127.0.0.1 PG_PORT=$PG_PORT_PRIVATE PG_USER=postgres PG_DB=postgres
    echo "run.sh: PG_HOST unset -> using the private PostgreSQL cluster $DATA_DIR/pg on 127.0.0.1:$PG_PORT (stop it with: tools/pg.sh stop $DATA_DIR/pg)"
else
    echo "run.sh: PG_HOST is set -> connecting to PostgreSQL at '${PG_HOST}':${PG_PORT:-5432} as ${PG_USER:-postgres}, database ${PG_DATABASE:-${PG_DB:-postgres}} (no private cluster)"
fi

if [[ -z "${FILE_BUFFER_DIR+set}" ]]; then
    export FILE_BUFFER_DIR="$DATA_DIR/spool"
    mkdir -p "$FILE_BUFFER_DIR"
fi

echo "run.sh: spool (FILE_BUFFER_DIR) = $FILE_BUFFER_DIR"
echo "run.sh: Queen at http://localhost:${PORT:-6632}  (health: http://localhost:${PORT:-6632}/health; Ctrl-C stops the broker)"
exec "$BIN" "$@"
