#!/usr/bin/env bash
# bench/retention.sh: issue 3's retention target, end to end: "the retention
# job keeps up with 5,000 msg/s of inflow without slowing push by more than 10%".
#
# Starts a private PostgreSQL (bench/lib.sh), then RUNS times, alternating,
# each window on a fresh database and a fresh broker with the retention job
# every RET_INTERVAL ms (RETENTION_INTERVAL):
#   off: queen-bench latency at RATE msg/s offered (open loop: PRODUCERS
#        connections pushing BATCH-message pushes on a fixed schedule,
#        CONSUMERS long-polling and acking), on a fresh queue without retention;
#   on:  the same on a fresh queue configured with retentionEnabled,
#        retentionSeconds=RET_SECS and completedRetentionSeconds=RET_SECS.
# During each run the queue's row count is sampled every 2 s; after it, the
# rows left, the age of the oldest row and the rows the job deleted
# (queen.retention_history) are read. The table is bounded when the rows left
# are about RATE × (RET_SECS + RET_INTERVAL) instead of RATE × the run.
# Prints one line per run and the medians (push p50/p99 request latency,
# msg/s the producers pushed in the window); raw queen-bench JSON lines go to
# bench/results/<date>-<commit>-retention.jsonl.
#
#   bench/retention.sh                     # 3 runs each way, 30 s windows
#   RUNS=1 DUR=5 bench/retention.sh        # smoke test
#
# Environment: RATE (5000), BATCH (10), PRODUCERS (8), CONSUMERS (2),
# PARTITIONS (100), DUR (30), WARM (2), RET_SECS (5), RET_INTERVAL (1000),
# BROKER_BIN (default $CARGO_TARGET_DIR or <repo>/target, release/queen), QB
# (default /tmp/target-bench/release/queen-bench; `cd bench && cargo build
# --release`), NUM_WORKERS (2), DB_POOL_SIZE (8), TAG (appended to the jsonl
# name, e.g. base/head for an A/B), APPEND (1: append to that jsonl instead of
# truncating it, for interleaved invocations), ORDER (alternate: even runs
# measure on before off; default off then on). Must run as root.
set -euo pipefail

RUNS=${RUNS:-3}
DUR=${DUR:-30}
WARM=${WARM:-2}
RATE=${RATE:-5000}
BATCH=${BATCH:-10}
PRODUCERS=${PRODUCERS:-8}
CONSUMERS=${CONSUMERS:-2}
PARTITIONS=${PARTITIONS:-100}
RET_SECS=${RET_SECS:-5}
RET_INTERVAL=${RET_INTERVAL:-1000}
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$BENCH_DIR")
QB=${QB:-/tmp/target-bench/release/queen-bench}
BROKER_BIN=${BROKER_BIN:-${CARGO_TARGET_DIR:-$REPO/target}/release/queen}
WORKERS=${NUM_WORKERS:-2}
POOL=${DB_POOL_SIZE:-8}
export RETENTION_INTERVAL=$RET_INTERVAL

source "$BENCH_DIR/lib.sh"
log() { bench_log "$@"; }
for f in "$QB" "$BROKER_BIN"; do
    [ -x "$f" ] || { log "missing $f"; exit 1; }
done

COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo nocommit)
mkdir -p "$BENCH_DIR/results"
JSONL="$BENCH_DIR/results/$(date +%F)-$COMMIT-retention${TAG:+-$TAG}.jsonl"
[ -n "${APPEND:-}" ] || : > "$JSONL"

TMP=$(mktemp -d /tmp/queen-retention-bench.XXXXXX)
chmod 755 "$TMP"
trap bench_cleanup EXIT

pg_start

q() { "${PSQL[@]}" -d queen -c "$1"; }
# Rows of the newest queue whose name starts with $1.
rows_of() {
    q "SELECT count(*) FROM queen.messages m JOIN queen.partitions p ON p.id = m.partition_id
        WHERE p.queue_id = (SELECT id FROM queen.queues WHERE name LIKE '$1%'
                             ORDER BY created_at DESC LIMIT 1)"
}

# mode label options -> one line: msg/s push_p50 push_p99 e2e_p50 max_rows rows_left oldest_s deleted
one_run() {
    local mode=$1 label=$2 opts=$3 prefix="ret-$2" sampler max=0
    (
        while sleep 2; do rows_of "$prefix" 2>/dev/null || true; done
    ) >"$TMP/samples-$label" &
    sampler=$!
    "$QB" --url "$URL" --pid "$BROKER_PID" --pg-pid "$PGPID" --json --label "$label" \
        --queue-prefix "$prefix" --queue-options "$opts" \
        latency --rate "$RATE" --batch "$BATCH" --producers "$PRODUCERS" --consumers "$CONSUMERS" \
        --partitions "$PARTITIONS" --duration "$DUR" --warmup "$WARM" --pop-batch 100 \
        >"$TMP/run-$label.json" || log "queen-bench $label exited $?"
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
    cat "$TMP/run-$label.json" >>"$JSONL"
    max=$(sort -n "$TMP/samples-$label" | tail -1)
    local left oldest deleted
    left=$(rows_of "$prefix")
    oldest=$(q "SELECT coalesce(round(extract(epoch FROM now() - min(m.created_at))::numeric, 1), 0)
                 FROM queen.messages m JOIN queen.partitions p ON p.id = m.partition_id
                WHERE p.queue_id = (SELECT id FROM queen.queues WHERE name LIKE '$prefix%'
                                     ORDER BY created_at DESC LIMIT 1)")
    deleted=$(q "SELECT coalesce(sum(h.messages_deleted), 0) FROM queen.retention_history h
                  JOIN queen.partitions p ON p.id = h.partition_id
                 WHERE p.queue_id = (SELECT id FROM queen.queues WHERE name LIKE '$prefix%'
                                      ORDER BY created_at DESC LIMIT 1)")
    python3 - "$TMP/run-$label.json" "${max:-0}" "$left" "$oldest" "$deleted" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
e2e = (r.get("e2e_latency") or {}).get("p50_ms", 0)
print(round(r["params"]["offered_msg_per_s"]), r["req_latency"]["p50_ms"], r["req_latency"]["p99_ms"], e2e,
      *sys.argv[2:])
EOF
}

OFF_T=(); OFF_50=(); OFF_99=(); ON_T=(); ON_50=(); ON_99=()
ON_OPTS="{\"retentionEnabled\":true,\"retentionSeconds\":$RET_SECS,\"completedRetentionSeconds\":$RET_SECS}"
for r in $(seq 1 "$RUNS"); do
    modes="off on"
    # ORDER=alternate: even runs measure on first, so neither mode always runs
    # second (after the other's rows and the autovacuum they trigger).
    [ "${ORDER:-}" = alternate ] && [ $((r % 2)) -eq 0 ] && modes="on off"
    for mode in $modes; do
        opts='{}'
        [ "$mode" = on ] && opts=$ON_OPTS
        # every window on an empty database and a fresh broker: windows that
        # shared one database ran on whatever the previous ones left (an off
        # window's 160k rows, their autovacuum), which made the spread between
        # runs larger than the effect measured
        broker_stop
        fresh_db >/dev/null
        broker_start "$BROKER_BIN"
        checkpoint
        read -r t p50 p99 e2e max left oldest deleted < <(one_run "$mode" "$mode$r" "$opts")
        echo "run $r retention $mode: pushed $t msg/s, push p50 $p50 ms p99 $p99 ms, e2e p50 $e2e ms;" \
             "rows max $max, left $left, oldest ${oldest}s, deleted by the job $deleted; load $(cut -d' ' -f1-3 /proc/loadavg)"
        if [ "$mode" = off ]; then OFF_T+=("$t"); OFF_50+=("$p50"); OFF_99+=("$p99")
        else ON_T+=("$t"); ON_50+=("$p50"); ON_99+=("$p99"); fi
    done
done

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ratio() { python3 -c "print(f'{$1/$2:.2f}' if $2 else '-')"; }
a=$(median "${OFF_T[@]}"); b=$(median "${ON_T[@]}")
c=$(median "${OFF_50[@]}"); d=$(median "${ON_50[@]}")
e=$(median "${OFF_99[@]}"); f=$(median "${ON_99[@]}")
echo
echo "| figure (median of $RUNS) | retention off | retention on | on / off |"
echo "|---|---|---|---|"
echo "| pushed msg/s (offered $RATE) | $a | $b | $(ratio "$b" "$a") |"
echo "| push p50 ms | $c | $d | $(ratio "$d" "$c") |"
echo "| push p99 ms | $e | $f | $(ratio "$f" "$e") |"
echo
echo "commit $COMMIT, PostgreSQL $PGVER, $(nproc) cores, NUM_WORKERS=$WORKERS DB_POOL_SIZE=$POOL," \
     "rate $RATE (batch $BATCH, $PRODUCERS producers, $CONSUMERS consumers, $PARTITIONS partitions)," \
     "${WARM}s warm-up + ${DUR}s windows, retention ${RET_SECS}s every ${RET_INTERVAL} ms; raw: $JSONL"
