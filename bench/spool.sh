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
# Fixed-rate inflow (issue 4's replay target as written: "replay drains at
# least 2x faster than the original inflow"): with `--rate N` step 2 offers
# N msg/s on a fixed schedule (queen-bench push --rate, open loop) instead
# of pushing as fast as the spool answers, so the backlog is what an outage
# of DUR s at that inflow leaves; the summary then gives replay / N, the
# target being >= 2. With `--live` the same N msg/s keep arriving (to a
# fresh queue, so straight to PostgreSQL) while the replay runs, for LIVE_DUR
# s from the restart: the replay competes with live pushes as it would in
# production, and the live run's achieved rate and p99 show whether replay
# starves them.
#
#   bench/spool.sh                      # 3 runs, 10 s windows, closed loop
#   bench/spool.sh --rate 10000 --live  # 10,000 msg/s offered, also during replay
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
RATE=${RATE:-}
LIVE=${LIVE:-0}
LIVE_DUR=${LIVE_DUR:-10}
while [ $# -gt 0 ]; do
    case $1 in
        --rate) RATE=$2; shift 2 ;;
        --live) LIVE=1; shift ;;
        *) echo "usage: bench/spool.sh [--rate N] [--live]" >&2; exit 2 ;;
    esac
done
if [ "$LIVE" = 1 ] && [ -z "$RATE" ]; then
    echo "--live needs --rate" >&2; exit 2
fi
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
push_rate() { # label [extra push flags] -> msg/s and errors of one push run (JSON line appended to $JSONL)
    local label=$1
    shift
    "$QB" --url "$URL" --pid "$BROKER_PID" --json --label "$label" \
        push --batch 100 --conns 50 --partitions 100 --duration "$DUR" --warmup "$WARM" "$@" \
        | tee -a "$JSONL" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(round(r["msg_per_s"]), r["errors"]["transport"]+r["errors"]["http_status"]+r["errors"]["items_failed"])'
}
RATE_FLAGS=()
[ -n "$RATE" ] && RATE_FLAGS=(--rate "$RATE")

NORMAL=(); BUFFERED=(); REPLAY=(); LIVE_RATE=(); LIVE_P99=()
for r in $(seq 1 "$RUNS"); do
    read -r normal nerr < <(push_rate "normal-run$r")
    checkpoint
    log "run $r: stopping PostgreSQL (immediate)"
    runuser -u postgres -- "$PGBIN/pg_ctl" -D "$PGDATA" -m immediate -w stop >/dev/null
    read -r buffered berr < <(push_rate "buffered-run$r" "${RATE_FLAGS[@]}")
    spooled=$(pending)
    log "run $r: $spooled records spooled; starting PostgreSQL"
    runuser -u postgres -- "$PGBIN/pg_ctl" -D "$PGDATA" -l "$TMP/pg.log" -w -t 120 \
        -o "-c port=$PGPORT -c listen_addresses=127.0.0.1 -c unix_socket_directories=$TMP \
            -c shared_buffers=4GB -c synchronous_commit=on -c max_connections=200" start >/dev/null
    t0=$(date +%s%N)
    live_pid=""
    if [ "$LIVE" = 1 ]; then
        "$QB" --url "$URL" --pid "$BROKER_PID" --json --label "live-during-replay-run$r" \
            push --batch 100 --conns 50 --partitions 100 --duration "$LIVE_DUR" --warmup 0 \
            --rate "$RATE" > "$TMP/live.json" &
        live_pid=$!
    fi
    for _ in $(seq 1 6000); do
        [ "$(pending)" = 0 ] && break
        sleep 0.1
    done
    t1=$(date +%s%N)
    left=$(pending)
    replay=$(python3 -c "print(round($spooled / (($t1 - $t0) / 1e9)))")
    live=""
    if [ -n "$live_pid" ]; then
        wait "$live_pid"
        tee -a "$JSONL" < "$TMP/live.json" >/dev/null
        read -r lrate lp99 lerr < <(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); e=r["errors"]; print(round(r["msg_per_s"]), round(r["req_latency"]["p99_ms"]), e["transport"]+e["http_status"]+e["items_failed"])' "$TMP/live.json")
        live="; live push during replay $lrate msg/s, p99 $lp99 ms (errors $lerr)"
        LIVE_RATE+=("$lrate"); LIVE_P99+=("$lp99")
    fi
    echo "run $r: normal push $normal msg/s (errors $nerr); buffered push $buffered msg/s (errors $berr);" \
         "replay $spooled records in $(( (t1 - t0) / 1000000 )) ms = $replay msg/s (left $left)$live"
    NORMAL+=("$normal"); BUFFERED+=("$buffered"); REPLAY+=("$replay")
    checkpoint
done

median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mn=$(median "${NORMAL[@]}"); mb=$(median "${BUFFERED[@]}"); mr=$(median "${REPLAY[@]}")
echo
echo "| figure (median of $RUNS) | msg/s | ratio |"
echo "|---|---|---|"
echo "| push b100 c50, PostgreSQL up | $mn | 1.00 |"
if [ -n "$RATE" ]; then
    echo "| push b100 c50 at $RATE msg/s offered, PostgreSQL down (buffered) | $mb | $(python3 -c "print(f'{$mb/$RATE:.2f}× offered')") |"
    echo "| replay after restart$([ "$LIVE" = 1 ] && echo ", $RATE msg/s live pushes meanwhile") | $mr | $(python3 -c "print(f'{$mr/$RATE:.2f}× the inflow (target ≥ 2), {$mr/$mn:.2f}× normal push')") |"
    if [ "$LIVE" = 1 ]; then
        echo "| live push during replay (p99 $(median "${LIVE_P99[@]}") ms) | $(median "${LIVE_RATE[@]}") | $(python3 -c "print(f'{$(median "${LIVE_RATE[@]}")/$RATE:.2f}× offered')") |"
    fi
else
    echo "| push b100 c50, PostgreSQL down (buffered) | $mb | $(python3 -c "print(f'{$mb/$mn:.2f}× normal')") |"
    echo "| replay after restart | $mr | $(python3 -c "print(f'{$mr/$mb:.2f}× buffered inflow, {$mr/$mn:.2f}× normal inflow')") |"
fi
echo
echo "runs: normal ${NORMAL[*]}; buffered ${BUFFERED[*]}; replay ${REPLAY[*]}${LIVE_RATE:+; live ${LIVE_RATE[*]}}"
echo "commit $COMMIT, PostgreSQL $PGVER, $(nproc) cores, NUM_WORKERS=$WORKERS DB_POOL_SIZE=$POOL, ${WARM}s warm-up + ${DUR}s windows; raw: $JSONL"
