#!/usr/bin/env bash
# tools/cluster.sh — N Queen brokers on loopback sharing one PostgreSQL, joined by the mesh.
#
#   tools/cluster.sh start [N]    build, start the private PostgreSQL and N brokers (default 3)
#   tools/cluster.sh stop         stop the brokers (the PostgreSQL cluster keeps running)
#   tools/cluster.sh status       each broker's pid and its view of its mesh peers
#
# Broker i (1..N) serves HTTP on 127.0.0.1:$((BASE_PORT + 2*(i-1))) and the mesh on the
# next port up, lists every other broker as a mesh peer and logs to <data>/broker-i.log.
# Settings: QUEEN_DATA_DIR (default <repo>/.queen-data/cluster), QUEEN_PG_PORT (6544),
# BASE_PORT (7632), QUEEN_SYNC_SECRET (default: a random one generated at start and kept
# in <data>/secret), QUEEN_SKIP_BUILD=1. Every other broker variable passes through.
# PG_HOST set: use that PostgreSQL instead of a private cluster.
# QUEEN_PROXY=1: also start queen-proxy in front of broker 1 (plaintext on
# QUEEN_PROXY_PORT, default 6711; control schema queen_proxy in the same PostgreSQL;
# cluster "local" as the default cluster; a key with every scope printed once).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DATA_DIR=${QUEEN_DATA_DIR:-$ROOT/.queen-data/cluster}
case "$DATA_DIR" in /*) ;; *) DATA_DIR="$PWD/$DATA_DIR" ;; esac
BASE_PORT=${BASE_PORT:-7632}
PG_PORT_PRIVATE=${QUEEN_PG_PORT:-6544}
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/queen"
PROXY_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/queen-proxy"

die() { echo "cluster.sh: $*" >&2; exit 1; }
say() { echo "cluster.sh: $*"; }

http_port() { echo $((BASE_PORT + 2 * ($1 - 1))); }
mesh_port() { echo $((BASE_PORT + 2 * ($1 - 1) + 1)); }

start() {
    local n=${1:-3}
    [[ "$n" =~ ^[0-9]+$ && "$n" -ge 1 ]] || die "N must be a positive number"
    mkdir -p "$DATA_DIR"
    if [[ "${QUEEN_SKIP_BUILD:-0}" != 1 ]]; then
        say "building the broker and the proxy (cargo build --release --workspace --bins)"
        (cd "$ROOT" && cargo build --release --workspace --bins)
    fi
    [[ -x "$BIN" ]] || die "$BIN not found; did the build succeed?"
    if [[ -z "${PG_HOST+set}" ]]; then
        if [[ $(id -u) -eq 0 ]]; then chmod o+x "$DATA_DIR" "$(dirname "$DATA_DIR")" 2>/dev/null || true; fi
        "$ROOT/tools/pg.sh" start "$DATA_DIR/pg" "$PG_PORT_PRIVATE"
        export PG_HOST=127.0.0.1 PG_PORT=$PG_PORT_PRIVATE PG_USER=postgres PG_DB=postgres
    fi
    if [[ -z "${QUEEN_SYNC_SECRET:-}" ]]; then
        [[ -s "$DATA_DIR/secret" ]] || od -An -tx1 -N32 /dev/urandom | tr -d ' \n' > "$DATA_DIR/secret"
        QUEEN_SYNC_SECRET=$(cat "$DATA_DIR/secret")
    fi
    export QUEEN_SYNC_SECRET
    local i j peers
    for ((i = 1; i <= n; i++)); do
        if [[ -f "$DATA_DIR/broker-$i.pid" ]] && kill -0 "$(cat "$DATA_DIR/broker-$i.pid")" 2>/dev/null; then
            say "broker $i already running (pid $(cat "$DATA_DIR/broker-$i.pid"))"
            continue
        fi
        peers=""
        for ((j = 1; j <= n; j++)); do
            [[ $j -eq $i ]] || peers="${peers:+$peers,}127.0.0.1:$(mesh_port "$j")"
        done
        mkdir -p "$DATA_DIR/spool-$i"
        PORT=$(http_port "$i") QUEEN_BIND_ADDR=127.0.0.1 \
            QUEEN_MESH_PORT=$(mesh_port "$i") QUEEN_MESH_PEERS=$peers \
            QUEEN_MESH_ADVERTISE_HOST=127.0.0.1 QUEEN_SERVER_ID="broker-$i" \
            FILE_BUFFER_DIR="$DATA_DIR/spool-$i" \
            nohup "$BIN" > "$DATA_DIR/broker-$i.log" 2>&1 &
        echo $! > "$DATA_DIR/broker-$i.pid"
        say "broker $i: http://127.0.0.1:$(http_port "$i")  mesh 127.0.0.1:$(mesh_port "$i")  pid $!  log $DATA_DIR/broker-$i.log"
    done
    say "shared state: curl -s http://127.0.0.1:$(http_port 1)/api/v1/system/shared-state"
    if [[ "${QUEEN_PROXY:-0}" == 1 ]]; then start_proxy; fi
}

# queen-proxy in front of broker 1, its control schema in the same PostgreSQL.
start_proxy() {
    [[ -x "$PROXY_BIN" ]] || die "$PROXY_BIN not found; did the build succeed?"
    export PXDB_HOST=$PG_HOST PXDB_PORT=${PG_PORT:-5432} PXDB_USER=${PG_USER:-postgres} \
        PXDB_PASSWORD=${PG_PASSWORD:-} PXDB_DB=${PG_DB:-postgres}
    local port=${QUEEN_PROXY_PORT:-6711}
    if [[ -f "$DATA_DIR/proxy.pid" ]] && kill -0 "$(cat "$DATA_DIR/proxy.pid")" 2>/dev/null; then
        say "proxy already running (pid $(cat "$DATA_DIR/proxy.pid"))"
        return
    fi
    # A second start finds the cluster there already; that is fine.
    "$PROXY_BIN" admin bootstrap --tenant local --cluster local \
        --broker-url "http://127.0.0.1:$(http_port 1)" ${QUEEN_PROXY_CELL_TOKEN:+--broker-token "$QUEEN_PROXY_CELL_TOKEN"} \
        > "$DATA_DIR/proxy-bootstrap.json" || true
    say "proxy API key (shown once): $("$PROXY_BIN" admin issue-key --cluster local --scopes produce,consume,read,admin)"
    QUEEN_PROXY_BIND_ADDR=127.0.0.1 QUEEN_PROXY_PORT=$port QUEEN_PROXY_DEFAULT_CLUSTER=local \
        nohup "$PROXY_BIN" > "$DATA_DIR/proxy.log" 2>&1 &
    echo $! > "$DATA_DIR/proxy.pid"
    say "proxy: http://127.0.0.1:$port  pid $!  log $DATA_DIR/proxy.log"
}

stop() {
    local f pid
    for f in "$DATA_DIR"/broker-*.pid "$DATA_DIR"/proxy.pid; do
        [[ -e "$f" ]] || continue
        pid=$(cat "$f")
        if kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" && say "stopped $(basename "$f" .pid) (pid $pid)"
        fi
        rm -f "$f"
    done
    say "PostgreSQL keeps running; stop it with: tools/pg.sh stop $DATA_DIR/pg"
}

status() {
    local f i pid
    for f in "$DATA_DIR"/broker-*.pid; do
        [[ -e "$f" ]] || continue
        i=${f##*broker-}
        i=${i%.pid}
        pid=$(cat "$f")
        if kill -0 "$pid" 2>/dev/null; then
            echo "broker $i (pid $pid) http://127.0.0.1:$(http_port "$i"):"
            curl -s "http://127.0.0.1:$(http_port "$i")/api/v1/system/shared-state" || echo "  (no answer)"
            echo
        else
            echo "broker $i: not running"
        fi
    done
}

case "${1:-}" in
    start) shift; start "$@" ;;
    stop) stop ;;
    status) status ;;
    *) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
