#!/usr/bin/env bash
# bench/timers.sh: issue 14's timer target, "timers fire with p99 under 200 ms
# past their due time at 1,000 timers/s".
#
# Starts a private PostgreSQL (bench/lib.sh: synchronous_commit=on), then RUNS
# times a fresh database and a fresh broker, and drives it with
# bench/timers_lateness.py: RATE timers/s scheduled open loop for DUR s, each
# due DELAY_MS after it was scheduled, consumers long-polling with autoAck.
# Prints per run the fire lateness (message created_at - deliverAt, database
# clock) and delivery lateness (arrival at a consumer - deliverAt) p50/p90/p99/
# max, and missing / doubled counts (both must be 0), then the medians of the
# p99s. Raw JSON lines go to bench/results/<date>-<commit>-timers.jsonl.
#
#   bench/timers.sh                          # 3 runs, 30 s at 1,000 timers/s
#   RUNS=1 DUR=3 RATE=200 bench/timers.sh    # smoke test
#
# Environment: RATE (1000), DUR (30), DELAY_MS (1000), TICK_MS (50),
# CONSUMERS (2), RUNS (3), BROKER_BIN (default <repo>/target/release/queen),
# NUM_WORKERS (2), DB_POOL_SIZE (8), and any QUEEN_SWEEPER_* variable (passed
# to the broker, e.g. QUEEN_SWEEPER_MAX_SLEEP_MS). Must run as root (PostgreSQL
# runs as user postgres).
set -euo pipefail

RUNS=${RUNS:-3}
DUR=${DUR:-30}
RATE=${RATE:-1000}
DELAY_MS=${DELAY_MS:-1000}
TICK_MS=${TICK_MS:-50}
CONSUMERS=${CONSUMERS:-2}
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$BENCH_DIR")
BROKER_BIN=${BROKER_BIN:-${CARGO_TARGET_DIR:-$REPO/target}/release/queen}
WORKERS=${NUM_WORKERS:-2}
POOL=${DB_POOL_SIZE:-8}

source "$BENCH_DIR/lib.sh"
log() { bench_log "$@"; }
[ -x "$BROKER_BIN" ] || { log "missing $BROKER_BIN (cargo build --release)"; exit 1; }

COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo nocommit)
mkdir -p "$BENCH_DIR/results"
JSONL="$BENCH_DIR/results/$(date +%F)-$COMMIT-timers.jsonl"
: > "$JSONL"

TMP=$(mktemp -d /tmp/queen-timers-bench.XXXXXX)
chmod 755 "$TMP"
trap bench_cleanup EXIT
pg_start

FIRE=(); DELIVER=()
for r in $(seq 1 "$RUNS"); do
    broker_stop
    fresh_db >/dev/null
    broker_start "$BROKER_BIN"
    checkpoint
    python3 "$BENCH_DIR/timers_lateness.py" "$URL" "${PSQL[*]} -d queen" --rate "$RATE" \
        --duration "$DUR" --delay-ms "$DELAY_MS" --tick-ms "$TICK_MS" --consumers "$CONSUMERS" \
        >"$TMP/run-$r.txt"
    sed '$d' "$TMP/run-$r.txt" | sed "s/^/run $r: /"
    tail -1 "$TMP/run-$r.txt" >>"$JSONL"
    read -r f d < <(tail -1 "$TMP/run-$r.txt" | python3 -c \
        'import json,sys; r=json.load(sys.stdin); print(r["fire_lateness_ms"]["p99"], r["delivery_lateness_ms"]["p99"])')
    FIRE+=("$f"); DELIVER+=("$d")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "median of $RUNS runs at $RATE timers/s: fire lateness p99 $(median "${FIRE[@]}") ms," \
     "delivery lateness p99 $(median "${DELIVER[@]}") ms (target < 200 ms); load $(cut -d' ' -f1-3 /proc/loadavg)"
