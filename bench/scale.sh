#!/usr/bin/env bash
# bench/scale.sh: the scale targets of issue 18, side by side, medians of RUNS.
#
# On one private PostgreSQL, RUNS rounds; every scenario on an empty database
# (fresh_db) and a fresh broker, so partitions of one scenario never weigh on
# the next:
#   1. push b100, 50 conns, over 100 and over 10,000 partitions;
#      target: the 10,000 figure at least 80% of the 100 figure;
#   2. a consumer group (`--consumer-group scale`) draining PREFILL messages
#      spread over 100 and over 10,000 partitions (pop b100 + ack/batch, 10
#      conns); target: 10,000 at least 75% of 100;
#   3. 100,000 partitions: PREFILL messages spread over them (every
#      partition created by the push itself), drained by the group; target:
#      no error, nothing lost, nothing twice.
# Prints one line per scenario and round, then the ratios of the medians;
# raw JSON lines go to bench/results/<date>-<commit>-scale.jsonl.
#
#   bench/scale.sh                       # 3 rounds, 10 s push windows
#   RUNS=1 DUR=3 PREFILL=20000 bench/scale.sh   # smoke test
#   CLAIM=16 bench/scale.sh              # drains pop with partitions=16
#
# Environment: RUNS (3), DUR (10), WARM (2), PREFILL (200000), BIG (100000
# partitions), CLAIM (1: the drains' pop `partitions=`, how many partitions one
# pop may claim; 1 is the API's default), MAX_SECS (300: a drain's limit; on 2026-12-02 the 100,000-partition
# drain used all of it, so a round takes about 7 minutes), BROKER_BIN (<repo>/target/release/queen), BENCH_TARGET_DIR
# (/tmp/target-bench; queen-bench built there with `cd bench && cargo build
# --release`), NUM_WORKERS (2), DB_POOL_SIZE (8, as run.sh). Must run as root.
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$BENCH_DIR")
source "$BENCH_DIR/lib.sh"

RUNS=${RUNS:-3}
DUR=${DUR:-10}
WARM=${WARM:-2}
PREFILL=${PREFILL:-200000}
BIG=${BIG:-100000}
MAX_SECS=${MAX_SECS:-300}
BROKER_BIN=${BROKER_BIN:-$REPO/target/release/queen}
QB=${BENCH_TARGET_DIR:-/tmp/target-bench}/release/queen-bench
WORKERS=${NUM_WORKERS:-2}
POOL=${DB_POOL_SIZE:-8}
for f in "$QB" "$BROKER_BIN"; do
    [ -x "$f" ] || { bench_log "missing $f"; exit 1; }
done

COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo nocommit)
mkdir -p "$BENCH_DIR/results"
JSONL="$BENCH_DIR/results/$(date +%F)-$COMMIT-scale.jsonl"
: >"$JSONL"
TMP=$(mktemp -d /tmp/queen-scale.XXXXXX)
chmod 755 "$TMP"
trap bench_cleanup EXIT

pg_start

# One scenario on an empty database and a fresh broker: queen-bench "$@".
fresh_run() {
    broker_stop
    fresh_db
    broker_start "$BROKER_BIN" || return 1
    checkpoint
    "$QB" "$@" --url "$URL" --pid "$BROKER_PID" --pg-pid "$PGPID" --json >>"$JSONL" \
        || bench_log "queen-bench $1 exited $?"
}

DRAIN=(--consumer-group scale --prefill "$PREFILL" --spread --batch 100 --conns 10 --max-secs "$MAX_SECS"
       --claim "${CLAIM:-1}")
for r in $(seq 1 "$RUNS"); do
    bench_log "round $r of $RUNS"
    for p in 100 10000; do
        fresh_run push --batch 100 --conns 50 --partitions "$p" --duration "$DUR" \
            --warmup "$WARM" --label "run$r"
    done
    for p in 100 10000 "$BIG"; do
        fresh_run drain "${DRAIN[@]}" --partitions "$p" --label "run$r"
    done
done
broker_stop

python3 - "$JSONL" "$BIG" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
big = int(sys.argv[2])
def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None
def pick(scenario, parts):
    return [r for r in rows if r.get("scenario") == scenario
            and (r.get("params") or {}).get("partitions") == parts]
def line(scenario, parts):
    rs = pick(scenario, parts)
    rate = med([r.get("msg_per_s") for r in rs])
    errors = sum(sum(v for v in (r.get("errors") or {}).values() if isinstance(v, int)) for r in rs)
    ver = [r.get("verify") or {} for r in rs]
    lost = sum(v.get("lost") or 0 for v in ver)
    dup = sum(v.get("duplicates") or 0 for v in ver)
    rss = med([(r.get("proc") or {}).get("broker_rss_peak_mb") for r in rs])
    claim = med([(r.get("params") or {}).get("claim") for r in rs])
    how = f" (pop partitions={claim})" if scenario == "drain" and claim else ""
    print(f"{scenario} over {parts:,} partitions{how}: {rate or 0:,.0f} msg/s (median of {len(rs)}), "
          f"errors {errors}, lost {lost}, twice {dup}, broker RSS peak {rss} MiB")
    return rate
p100, p10k = line("push", 100), line("push", 10000)
d100, d10k = line("drain", 100), line("drain", 10000)
line("drain", big)
if p100 and p10k:
    print(f"push 10,000 / 100 partitions: {p10k / p100:.2f}x (target >= 0.80x)")
if d100 and d10k:
    print(f"group drain 10,000 / 100 partitions: {d10k / d100:.2f}x (target >= 0.75x)")
EOF
bench_log "raw lines: $JSONL"
