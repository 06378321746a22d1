#!/usr/bin/env bash
# bench/features.sh: the figures of the features beside the queues that have
# no script of their own, in one run on one private PostgreSQL:
#   - ephemeral queues (issue 14): queen-bench ephemeral, push b100 + pop b100
#     autoAck, 4 + 4 connections, 8 partitions; the target is 150,000 msg/s
#     with no PostgreSQL in the path, and the broker's RSS stays small;
#   - streams (issue 15): streams-bench, cycles/s on 20 partitions through the
#     broker and the same statement from a plain PostgreSQL client, one
#     transaction each; the target is the broker at 50% of the plain client.
# RUNS rounds, interleaved; medians printed at the end; raw JSON lines go to
# bench/results/<date>-<commit>-features.jsonl. KV, timers and the proxy have
# their own scripts (kv.sh, timers.sh, proxy.sh).
#
#   bench/features.sh                # 3 rounds, 10 s windows
#   RUNS=1 DUR=3 bench/features.sh   # smoke test
#
# Environment: RUNS (3), DUR (10), WARM (2), BROKER_BIN (<repo>/target/release/
# queen), BENCH_TARGET_DIR (/tmp/target-bench: queen-bench and streams-bench
# built there with `cd bench && cargo build --release`), NUM_WORKERS (2),
# DB_POOL_SIZE (20: streams-bench's plain client holds one connection per
# partition, 20, so the broker gets as many). Must run as root.
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$BENCH_DIR")
source "$BENCH_DIR/lib.sh"

RUNS=${RUNS:-3}
DUR=${DUR:-10}
WARM=${WARM:-2}
BROKER_BIN=${BROKER_BIN:-$REPO/target/release/queen}
BT=${BENCH_TARGET_DIR:-/tmp/target-bench}/release
WORKERS=${NUM_WORKERS:-2}
POOL=${DB_POOL_SIZE:-20}

COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo nocommit)
mkdir -p "$BENCH_DIR/results"
JSONL="$BENCH_DIR/results/$(date +%F)-$COMMIT-features.jsonl"
: >"$JSONL"
TMP=$(mktemp -d /tmp/queen-features.XXXXXX)
chmod 755 "$TMP"
trap bench_cleanup EXIT

pg_start
broker_start "$BROKER_BIN" || exit 1
DSN="host=127.0.0.1 port=$PGPORT user=postgres dbname=queen"
for r in $(seq 1 "$RUNS"); do
    bench_log "round $r of $RUNS"
    checkpoint
    "$BT/queen-bench" ephemeral --url "$URL" --pid "$BROKER_PID" --pg-pid "$PGPID" --batch 100 \
        --pop-batch 100 --conns 4 --partitions 8 --duration "$DUR" --warmup "$WARM" \
        --label "run$r" --json >>"$JSONL" || bench_log "ephemeral exited $?"
    checkpoint
    "$BT/streams-bench" --url "$URL" --dsn "$DSN" --partitions 20 --duration "$DUR" \
        --warmup "$WARM" --label "run$r" --json >>"$JSONL" || bench_log "streams-bench exited $?"
done

python3 - "$JSONL" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None
def fmt(x, unit=""):
    return "–" if x is None else f"{x:,.0f}{unit}"
eph = [r for r in rows if r.get("scenario") == "ephemeral"]
if eph:
    rate = med([r.get("msg_per_s") for r in eph])
    rss = med([(r.get("proc") or {}).get("broker_rss_peak_mb") for r in eph])
    print(f"ephemeral push b100 + pop b100, 4+4 conns: {fmt(rate)} msg/s popped "
          f"(target 150,000: {rate / 150000:.2f}x), broker RSS peak {fmt(rss)} MiB, runs {len(eph)}")
def cycles(mode):
    vals = []
    for r in rows:
        for m in (r.get("modes") or [r]):
            if m.get("mode") == mode:
                vals.append(m.get("cycles_per_s"))
    return med(vals)
b, p = cycles("broker"), cycles("pg")
if b is not None:
    share = f"{b / p:.2f}x" if p else "–"
    print(f"streams cycles/s on 20 partitions: broker {fmt(b)}, plain PostgreSQL client {fmt(p)}, "
          f"broker / plain = {share} (target >= 0.50x)")
EOF
bench_log "raw lines: $JSONL"
