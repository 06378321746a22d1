#!/usr/bin/env bash
# bench/rss.sh: where the broker's resident memory goes, scenario by scenario
# (issue 18: "broker RSS <= 25 MiB at peak in every scenario").
#
# One private PostgreSQL for the whole run; a FRESH broker per scenario, so
# each VmHWM is that scenario's own peak (a broker's VmHWM never goes down).
# While a scenario runs, bench/rss_sample.py samples /proc/PID/smaps_rollup
# every 0.2 s and keeps the largest, with the /proc/PID/smaps read at that
# moment, split by kind of mapping (mimalloc arenas, thread stacks, io_uring
# rings, the binary, libraries, other anonymous).
#
#   BROKER_BIN=target/ci/queen bench/rss.sh [SCENARIO ...]
#
# Scenarios (default: all): push100 (push b100 c50 p100, the issue's row),
# push1000 (b100 c50 p1000), push10 (b10 c50 p1000), push1 (b1 c50 p1000),
# drain (pop b100 + ack c10), drainauto (autoAck), latency (1,000 msg/s,
# b10, 4 producers + 4 consumers), idle (boot, then 5 s of nothing),
# bigpush (one 32 MiB push request), bigpop (10 pushes of 1 MiB, then one
# pop of all 10,000 messages: an ~11 MiB answer), long (one broker through
# drain, push100, drainauto, push10 and latency in turn; not in the default set).
# Environment: NUM_WORKERS (2), DB_POOL_SIZE (20, the issue's), DUR (10),
# QB (queen-bench binary), OUT (directory for the .json/.smaps files,
# default /tmp/queen-rss-<commit>), EXTRA_ENV (more VAR=value for the broker).
# Run as root, under `flock /tmp/bench.lock` when the box is shared. Prints one
# markdown table row per scenario.
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$BENCH_DIR")
source "$BENCH_DIR/lib.sh"
WORKERS=${NUM_WORKERS:-2}
POOL=${DB_POOL_SIZE:-20}
DUR=${DUR:-10}
BROKER_BIN=${BROKER_BIN:-$REPO/target/ci/queen}
QB=${QB:-$(ls /tmp/target-bench/release/queen-bench /tmp/target-bench/ci/queen-bench 2>/dev/null | head -1 || true)}
COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo nocommit)
OUT=${OUT:-/tmp/queen-rss-$COMMIT}
mkdir -p "$OUT"
SCENARIOS=${*:-idle push100 push1000 push10 push1 drain drainauto latency bigpush bigpop}

# broker_start passes its own environment on to the broker.
# shellcheck disable=SC2086
[ -n "${EXTRA_ENV:-}" ] && export ${EXTRA_ENV?}

TMP=$(mktemp -d /tmp/queen-rss.XXXXXX)
chmod 755 "$TMP"
trap bench_cleanup EXIT
pg_start

# A push request of about $1 MiB holding 1,000 items, to queue $2 (each big
# scenario has its own: the database lives through the whole script).
big_body() {
    python3 - "$1" "$2" <<'EOF'
import json, sys
mib = int(sys.argv[1]); queue = sys.argv[2]; n = 1000
pad = "x" * (mib * 1048576 // n - 60)
print(json.dumps({"items": [{"queue": queue, "partition": "p", "payload": {"i": i, "pad": pad}} for i in range(n)]}))
EOF
}

run_scenario() {
    local name=$1 pfx="$OUT/$1"
    rm -f "$pfx.stop" "$pfx.json"
    broker_start "$BROKER_BIN" || return 1
    python3 "$BENCH_DIR/rss_sample.py" "$BROKER_PID" "$pfx" &
    local sampler=$!
    local Q=("$QB" --url "$URL" --pid "$BROKER_PID" --json --label rss --queue-prefix "rss$name")
    case "$name" in
        idle) sleep 5 ;;
        push100) "${Q[@]}" push --batch 100 --conns 50 --partitions 100 --duration "$DUR" --warmup 2 --payload-bytes 100 >"$pfx.bench" ;;
        push1000) "${Q[@]}" push --batch 100 --conns 50 --partitions 1000 --duration "$DUR" --warmup 2 --payload-bytes 100 >"$pfx.bench" ;;
        push10) "${Q[@]}" push --batch 10 --conns 50 --partitions 1000 --duration "$DUR" --warmup 2 --payload-bytes 100 >"$pfx.bench" ;;
        push1) "${Q[@]}" push --batch 1 --conns 50 --partitions 1000 --duration "$DUR" --warmup 2 --payload-bytes 100 >"$pfx.bench" ;;
        drain) "${Q[@]}" drain --prefill 100000 --partitions 100 --batch 100 --conns 10 >"$pfx.bench" ;;
        drainauto) "${Q[@]}" drain --prefill 100000 --partitions 100 --batch 100 --conns 10 --auto-ack >"$pfx.bench" ;;
        latency) "${Q[@]}" latency --rate 1000 --batch 10 --producers 4 --consumers 4 --partitions 10 --duration "$DUR" --warmup 2 >"$pfx.bench" ;;
        long)
            # one broker through mixed work, as a long-lived one sees it: its peak
            # is what the work leaves behind (arenas, connection buffers), not one
            # scenario's own
            for phase in "drain --prefill 100000 --partitions 100 --batch 100 --conns 10" \
                "push --batch 100 --conns 50 --partitions 100 --duration $DUR --warmup 2 --payload-bytes 100" \
                "drain --prefill 100000 --partitions 100 --batch 100 --conns 10 --auto-ack" \
                "push --batch 10 --conns 50 --partitions 1000 --duration $DUR --warmup 2 --payload-bytes 100" \
                "latency --rate 1000 --batch 10 --producers 4 --consumers 4 --partitions 10 --duration $DUR --warmup 2"; do
                # shellcheck disable=SC2086
                "${Q[@]}" $phase >>"$pfx.bench"
                bench_log "long: after ${phase%% *}: VmRSS $(awk '/VmRSS/ {print $2}' "/proc/$BROKER_PID/status") kB"
            done ;;
        bigpush)
            big_body 32 rss-bigpush >"$TMP/big.json"
            curl -sf -o /dev/null -X POST -H 'Content-Type: application/json' --data-binary @"$TMP/big.json" "$URL/api/v1/push" || bench_log "big push failed"
            sleep 1 ;;
        bigpop)
            # 10 pushes of 1,000 items of ~1 KiB, then one pop of all 10,000 (~11 MiB answer)
            big_body 1 rss-bigpop >"$TMP/big.json"
            for _ in $(seq 1 10); do
                curl -sf -o /dev/null -X POST -H 'Content-Type: application/json' --data-binary @"$TMP/big.json" "$URL/api/v1/push" || bench_log "push failed"
            done
            sleep 1
            curl -sf -o "$TMP/pop.json" "$URL/api/v1/pop/queue/rss-bigpop?batch=10000&autoAck=true" || bench_log "big pop failed"
            bench_log "big pop answered $(stat -c %s "$TMP/pop.json") bytes"
            sleep 1 ;;
        *) bench_log "unknown scenario $name"; touch "$pfx.stop"; wait "$sampler"; broker_stop; return 1 ;;
    esac
    touch "$pfx.stop"
    wait "$sampler" || true
    # what stays resident once the load is gone (retention, not peak)
    sleep 2
    awk '/VmRSS/ {print $2}' "/proc/$BROKER_PID/status" >"$pfx.after"
    broker_stop
    python3 - "$name" "$pfx.json" "$pfx.bench" <<'EOF'
import json, os, sys
name, path, bench = sys.argv[1:4]
r = json.load(open(path))
after = path[:-len(".json")] + ".after"
r["after_kB"] = int(open(after).read().strip() or 0) if os.path.exists(after) else None
mib = lambda kb: "%.1f" % (kb / 1024) if kb is not None else "–"
roll = r.get("rollup_kB", {})
kinds = r.get("by_kind_kB", {})
rate = ""
if os.path.exists(bench):
    for line in open(bench):
        if line.startswith("{"):
            b = json.loads(line)
            e = b.get("errors")
            n = sum(v for v in e.values() if isinstance(v, int)) if isinstance(e, dict) else e
            rate = "%.0f msg/s, %s errors" % (b.get("msg_per_s") or 0, n)
parts = ", ".join("%s %s" % (k, mib(v)) for k, v in kinds.items() if v >= 256)
print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
    name, mib(r.get("VmHWM_kB")), mib(roll.get("Rss")), mib(roll.get("Anonymous")),
    mib(roll.get("file")), mib(r.get("after_kB")), parts, rate))
EOF
}

echo "| scenario | VmHWM MiB | Rss at sampled peak | anon | file | Rss 2 s after | by mapping at the peak (MiB) | load |"
echo "|---|---|---|---|---|---|---|---|"
for s in $SCENARIOS; do
    run_scenario "$s" || bench_log "scenario $s failed"
done
bench_log "files in $OUT"
