#!/usr/bin/env bash
# tools/dashboard-check.sh — the dashboard in a real browser (issue 7).
#
# Starts a private PostgreSQL cluster, the broker (QUEEN_BIN, default
# target/${QUEEN_TEST_PROFILE:-ci}/queen) and chromedriver on free loopback
# ports, then runs tools/dashboard_check.py (standard library only), which
# drives Debian's headless Chromium over WebDriver and saves screenshots under
# target/dashboard-shots/. Two passes: JWT off, then JWT on (HS256, a fresh
# database; the token is entered once in the browser, shots under jwt/).
# Needs: apt-get install chromium chromium-driver.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BIN=${QUEEN_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/${QUEEN_TEST_PROFILE:-ci}/queen}
SHOTS=${DASHBOARD_SHOTS:-$ROOT/target/dashboard-shots}
command -v chromedriver >/dev/null || { echo "dashboard-check: chromedriver missing (apt-get install chromium chromium-driver)"; exit 1; }
[[ -x "$BIN" ]] || { echo "dashboard-check: $BIN missing (build it first)"; exit 1; }

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
probe() { python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "$1" >/dev/null 2>&1; }
TMP=$(mktemp -d /tmp/queen-dash.XXXXXX)
chmod 755 "$TMP"
BROKER_PID="" DRIVER_PID=""
cleanup() {
    for pid in $DRIVER_PID $BROKER_PID; do
        kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    done
    "$ROOT/tools/pg.sh" stop "$TMP/pg" >/dev/null 2>&1 || true
    rm -rf "$TMP"
}
trap cleanup EXIT

pgport=$(free_port)
"$ROOT/tools/pg.sh" start "$TMP/pg" "$pgport" || exit 1

# start_broker DB [VAR=value ...]: the broker on a free port against database DB.
start_broker() {
    local db=$1
    shift
    port=$(free_port)
    env PG_HOST=127.0.0.1 PG_PORT="$pgport" PG_USER=postgres PG_PASSWORD=postgres PG_DB="$db" \
        PORT="$port" QUEEN_BIND_ADDR=127.0.0.1 FILE_BUFFER_DIR="$TMP/spool-$db" LOG_LEVEL=info "$@" \
        "$BIN" >"$TMP/broker.log" 2>&1 </dev/null &
    BROKER_PID=$!
    for _ in $(seq 1 120); do
        probe "http://127.0.0.1:$port/health" && break
        sleep 0.5
    done
    probe "http://127.0.0.1:$port/health" || { echo "dashboard-check: broker not healthy"; tail -30 "$TMP/broker.log"; exit 1; }
}
stop_broker() {
    kill -TERM "$BROKER_PID" 2>/dev/null && wait "$BROKER_PID" 2>/dev/null
    BROKER_PID=""
}
start_broker postgres

dport=$(free_port)
chromedriver --port="$dport" --allowed-ips=127.0.0.1 >"$TMP/chromedriver.log" 2>&1 &
DRIVER_PID=$!
for _ in $(seq 1 50); do
    probe "http://127.0.0.1:$dport/status" && break
    sleep 0.2
done

timeout --kill-after=10 300 python3 "$ROOT/tools/dashboard_check.py" \
    "http://127.0.0.1:$port" "http://127.0.0.1:$dport" "$SHOTS"
rc=$?
[[ $rc -ne 0 ]] && { echo "dashboard-check: failed (exit $rc); broker log tail:"; tail -30 "$TMP/broker.log"; exit $rc; }

# Second pass: JWT on, a fresh database.
stop_broker
secret=$(python3 -c 'import secrets; print(secrets.token_hex(32))')
runuser -u postgres -- psql -qX -h 127.0.0.1 -p "$pgport" -U postgres -d postgres -c "CREATE DATABASE dashjwt" 2>/dev/null \
    || psql -qX -h 127.0.0.1 -p "$pgport" -U postgres -d postgres -c "CREATE DATABASE dashjwt" || exit 1
start_broker dashjwt JWT_ENABLED=true JWT_ALGORITHM=HS256 JWT_SECRET="$secret"
QUEEN_DASH_JWT_SECRET=$secret timeout --kill-after=10 300 python3 "$ROOT/tools/dashboard_check.py" \
    "http://127.0.0.1:$port" "http://127.0.0.1:$dport" "$SHOTS/jwt"
rc=$?
[[ $rc -ne 0 ]] && { echo "dashboard-check (JWT on): failed (exit $rc); broker log tail:"; tail -30 "$TMP/broker.log"; }
exit $rc
