#!/usr/bin/env bash
# bench/spool.sh: the disk spool targets of issue 4, end to end.
#
# Starts a private PostgreSQL and the broker (bench/lib.sh), then RUNS times:
#   1. normal push throughput: queen-bench push, batch 100, 50 connections,
#      100 partitions, DUR s (after WARM s of warm-up);
#   2. PostgreSQL stopped hard (pg_ctl stop -m immediate), the same push run:
#      every push is answered `buffered` from the per-shard spool;
#   3. PostgreSQL started again (pg_ctl start -w returns once it accepts
#      connections); the replay rate is the spooled records divided by the
#      time from that moment until /api/v1/status/buffers says pending 0
#      (so it includes the broker noticing PostgreSQL is back).
# Prints one line per run and the medians; raw queen-bench JSON lines go to
# bench/results/<date>-<commit>-spool.jsonl.
#
#   bench/spool.sh                      # 3 runs, 10 s windows
#   RUNS=1 DUR=3 bench/spool.sh         # smoke test
#
# Environment: BROKER_BIN (default $CARGO_TARGET_DIR or <repo>/target,
# release/queen), QB (queen-bench, default /tmp/target-bench/release/queen-bench;
# build it with `cd bench && cargo build --release`), NUM_WORKERS (2),
# DB_POOL_SIZE (8). Must run as root (PostgreSQL runs as user postgres).
set -euo pipefail

RUNS=${RUNS:-3}
DUR=${DUR:-10}
WARM=${WARM:-2}
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$BENCH_DIR")
QB=${QB:-/tmp/target-bench/release/queen-bench}
BROKER_BIN=${BROKER_BIN:-${CARGO_TARGET_DIR:-$REPO/target}/release/queen}
WORKERS=${NUM_WORKERS:-2}
POOL=${DB_POOL_SIZE:-8}
# A refused connection is seen at once; a dead host within this bound.
export DB_CONNECTION_TIMEOUT=${DB_CONNECTION_TIMEOUT:-500}

source "$BENCH_DIR/lib.sh"
log() { bench_log "$@"; }
for f in "$QB" "$BROKER_BIN"; do
    [ -x "$f" ] || { log "missing $f"; exit 1; }
done

COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo nocommit)
mkdir -p "$BENCH_DIR/results"
JSONL="$BENCH_DIR/results/$(date +%F)-$COMMIT-spool.jsonl"
: > "$JSONL"

TMP=$(mktemp -d /tmp/queen-spool-bench.XXXXXX)
chmod 755 "$TMP"
trap bench_cleanup EXIT

pg_start
broker_start "$BROKER_BIN"

pending() {
    curl -sf "$URL/api/v1/status/buffers" | python3 -c 'import json,sys; print(json.load(sys.stdin)["pending"])'
}
push_rate() { # label -> msg/s of one push run (JSON line appended to $JSONL)
    "$QB" --url "$URL" --pid "$BROKER_PID" --json --label "$1" \
        push --batch 100 --conns 50 --partitions 100 --duration "$DUR" --warmup "$WARM" \
        | tee -a "$JSONL" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(round(r["msg_per_s"]), r["errors"]["transport"]+r["errors"]["http_status"]+r["errors"]["items_failed"])'
}

NORMAL=(); BUFFERED=(); REPLAY=()
for r in $(seq 1 "$RUNS"); do
    read -r normal nerr < <(push_rate "normal-run$r")
    checkpoint
    log "run $r: stopping PostgreSQL (immediate)"
    runuser -u postgres -- "$PGBIN/pg_ctl" -D "$PGDATA" -m immediate -w stop >/dev/null
    read -r buffered berr < <(push_rate "buffered-run$r")
    spooled=$(pending)
    log "run $r: $spooled records spooled; starting PostgreSQL"
    runuser -u postgres -- "$PGBIN/pg_ctl" -D "$PGDATA" -l "$TMP/pg.log" -w -t 120 \
        -o "-c port=$PGPORT -c listen_addresses=127.0.0.1 -c unix_socket_directories=$TMP \
            -c shared_buffers=4GB -c synchronous_commit=on -c max_connections=200" start >/dev/null
    t0=$(date +%s%N)
    for _ in $(seq 1 6000); do
        [ "$(pending)" = 0 ] && break
        sleep 0.1
    done
    t1=$(date +%s%N)
    left=$(pending)
    replay=$(python3 -c "print(round($spooled / (($t1 - $t0) / 1e9)))")
    echo "run $r: normal push $normal msg/s (errors $nerr); buffered push $buffered msg/s (errors $berr);" \
         "replay $spooled records in $(( (t1 - t0) / 1000000 )) ms = $replay msg/s (left $left)"
    NORMAL+=("$normal"); BUFFERED+=("$buffered"); REPLAY+=("$replay")
    checkpoint
done

median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mn=$(median "${NORMAL[@]}"); mb=$(median "${BUFFERED[@]}"); mr=$(median "${REPLAY[@]}")
echo
echo "| figure (median of $RUNS) | msg/s | ratio |"
echo "|---|---|---|"
echo "| push b100 c50, PostgreSQL up | $mn | 1.00 |"
echo "| push b100 c50, PostgreSQL down (buffered) | $mb | $(python3 -c "print(f'{$mb/$mn:.2f}× normal')") |"
echo "| replay after restart | $mr | $(python3 -c "print(f'{$mr/$mb:.2f}× buffered inflow, {$mr/$mn:.2f}× normal inflow')") |"
echo
echo "commit $COMMIT, PostgreSQL $PGVER, $(nproc) cores, NUM_WORKERS=$WORKERS DB_POOL_SIZE=$POOL, ${WARM}s warm-up + ${DUR}s windows; raw: $JSONL"
