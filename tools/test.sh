#!/usr/bin/env bash
# tools/test.sh — THE test command.
#
#   1. cargo fmt --all -- --check
#   2. cargo clippy --workspace --all-targets -- -D warnings
#   3. cargo test --profile ci --workspace --no-fail-fast   (tests/ start their own PostgreSQL;
#      every test binary runs even after one fails, so a red run shows every failure)
#   4. sql: SKIP_BENCH=1 sql/test/run.sh (the files of sql/ORDER applied as
#      the broker applies them, twice, then the SQL-level checks of sql/test)
#   5. real-client check: clients/python/check_client.py (queen-mq 1.3.0 from
#      PyPI, in a venv) against target/ci/queen on a private cluster
#   6. dashboard: tools/dashboard-check.sh (Debian's headless Chromium over
#      chromedriver); skipped when chromedriver is not installed
#
# Every step runs even when an earlier one failed (except 5 when the build
# fails); the exit code is non-zero when any step failed.
# Environment:
#   QUEEN_TEST_STEPS    steps to run, default "fmt clippy test sql client dashboard"
#   QUEEN_TEST_TIMEOUT  seconds allowed for `cargo test` (default 1500)
#   QUEEN_VENV          venv for the Python client (default <repo>/.venv)
#   QUEEN_SKIP_BUILD=1  client step: use the existing target/<profile>/queen
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

STEPS=${QUEEN_TEST_STEPS:-fmt clippy test sql client dashboard}
# Cargo profile of the test build and of the binary the client check runs
# (Cargo.toml: release without LTO, parallel codegen).
PROFILE=${QUEEN_TEST_PROFILE:-ci}
declare -a RESULTS=()
FAILED=0
START_ALL=$SECONDS

banner() { echo; echo "==== test.sh: $* ===="; }

run_step() {
    local name=$1; shift
    local t0=$SECONDS rc
    banner "$name: $*"
    "$@"
    rc=$?
    if [[ $rc -eq 0 ]]; then
        RESULTS+=("PASS  $name ($((SECONDS - t0))s)")
    else
        RESULTS+=("FAIL  $name (exit $rc, $((SECONDS - t0))s)")
        FAILED=1
    fi
    return $rc
}

want() { [[ " $STEPS " == *" $1 "* ]]; }

# ---------------------------------------------------------------- client check
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

CLIENT_TMP=""
BROKER_PID=""
client_cleanup() {
    if [[ -n "$BROKER_PID" ]] && kill -0 "$BROKER_PID" 2>/dev/null; then
        kill -TERM "$BROKER_PID" 2>/dev/null
        for _ in $(seq 1 50); do kill -0 "$BROKER_PID" 2>/dev/null || break; sleep 0.2; done
        if kill -0 "$BROKER_PID" 2>/dev/null; then
            echo "test.sh: broker did not stop on SIGTERM within 10s; killing it"
            kill -KILL "$BROKER_PID" 2>/dev/null
        fi
        wait "$BROKER_PID" 2>/dev/null
    fi
    BROKER_PID=""
    if [[ -n "$CLIENT_TMP" ]]; then
        "$ROOT/tools/pg.sh" stop "$CLIENT_TMP/pg" || true
        rm -rf "$CLIENT_TMP"
        CLIENT_TMP=""
    fi
}

client_check() {
    local py bin pgport port rc
    py=$("$ROOT/tools/venv.sh") || { echo "test.sh: could not prepare the Python venv"; return 1; }
    bin="${CARGO_TARGET_DIR:-$ROOT/target}/$PROFILE/queen"
    if [[ "${QUEEN_SKIP_BUILD:-0}" != 1 ]]; then
        echo "test.sh: cargo build --profile $PROFILE (the binary the client check runs)"
        cargo build --profile "$PROFILE" || return 1
    fi
    [[ -x "$bin" ]] || { echo "test.sh: $bin missing after build"; return 1; }

    CLIENT_TMP=$(mktemp -d /tmp/queen-client.XXXXXX)
    chmod 755 "$CLIENT_TMP" # user postgres must reach the data dir inside
    pgport=$(free_port)
    "$ROOT/tools/pg.sh" start "$CLIENT_TMP/pg" "$pgport" || return 1

    port=$(free_port)
    echo "test.sh: starting $bin on 127.0.0.1:$port (log $CLIENT_TMP/broker.log)"
    PG_HOST=127.0.0.1 PG_PORT=$pgport PG_USER=postgres PG_PASSWORD=postgres PG_DB=postgres \
        PORT=$port QUEEN_BIND_ADDR=127.0.0.1 FILE_BUFFER_DIR="$CLIENT_TMP/spool" \
        LOG_LEVEL=${LOG_LEVEL:-info} \
        "$bin" >"$CLIENT_TMP/broker.log" 2>&1 </dev/null &
    BROKER_PID=$!

    local healthy=0
    for _ in $(seq 1 120); do
        if ! kill -0 "$BROKER_PID" 2>/dev/null; then
            wait "$BROKER_PID"; rc=$?
            BROKER_PID=""
            echo "test.sh: broker exited during startup (exit $rc); last log lines:"
            tail -n 40 "$CLIENT_TMP/broker.log"
            return 1
        fi
        if python3 - "$port" <<'EOF' 2>/dev/null; then
import sys, urllib.request
with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=2) as r:
    sys.exit(0 if r.status == 200 else 1)
EOF
            healthy=1
            break
        fi
        sleep 0.5
    done
    if [[ $healthy -ne 1 ]]; then
        echo "test.sh: broker did not answer GET /health with 200 within 60s; last log lines:"
        tail -n 40 "$CLIENT_TMP/broker.log"
        return 1
    fi
    echo "test.sh: broker healthy; running the client check"

    timeout --kill-after=10 300 "$py" "$ROOT/clients/python/check_client.py" "http://127.0.0.1:$port"
    rc=$?
    if [[ $rc -ne 0 ]]; then
        [[ $rc -eq 124 ]] && echo "test.sh: client check timed out after 300s"
        echo "test.sh: client check failed (exit $rc); last broker log lines:"
        tail -n 40 "$CLIENT_TMP/broker.log"
    fi
    return $rc
}

client_step() {
    local rc
    client_check
    rc=$?
    client_cleanup
    return $rc
}
trap 'client_cleanup; exit 130' INT TERM

# ---------------------------------------------------------------------- steps
if want fmt; then
    run_step fmt cargo fmt --all -- --check
fi
if want clippy; then
    run_step clippy cargo clippy --workspace --all-targets -- -D warnings
fi
if want test; then
    run_step test timeout --foreground --kill-after=30 "${QUEEN_TEST_TIMEOUT:-1500}" \
        cargo test --profile "$PROFILE" --workspace --no-fail-fast
fi
if want sql; then
    run_step sql env SKIP_BENCH=1 "$ROOT/sql/test/run.sh"
fi
if want client; then
    run_step client client_step
fi

if want dashboard; then
    if command -v chromedriver >/dev/null; then
        run_step dashboard bash -c 'cargo build --profile "$0" && QUEEN_TEST_PROFILE="$0" bash tools/dashboard-check.sh' "$PROFILE"
    else
        RESULTS+=("SKIP  dashboard (chromedriver not installed)")
    fi
fi

banner "summary ($((SECONDS - START_ALL))s)"
for r in "${RESULTS[@]}"; do echo "$r"; done
if [[ $FAILED -ne 0 ]]; then
    echo "test.sh: FAILED"
    exit 1
fi
echo "test.sh: all steps passed"
