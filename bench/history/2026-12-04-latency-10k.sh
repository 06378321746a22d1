#!/usr/bin/env bash
# usage: 2026-12-04-latency-10k.sh BROKER_BIN
# End-to-end latency at 10,000 msg/s offered (issue 18: p99 <= 50 ms): pushes of 10
# over 10 partitions, PROD producers (16: 4 cannot offer 10,000/s at ~7 ms a push
# commit), CONS consumers (4), 10 s after 2 s of warm-up, on one private PostgreSQL
# with a fresh broker per run, RUNS runs (3). RATE overrides the offered rate.
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")/.." && pwd)
source "$BENCH_DIR/lib.sh"
WORKERS=2; POOL=8
TMP=$(mktemp -d /tmp/queen-lat.XXXXXX); chmod 755 "$TMP"
trap bench_cleanup EXIT
pg_start
for r in $(seq 1 "${RUNS:-3}"); do
    broker_start "$1"
    /tmp/target-bench/release/queen-bench --url "$URL" --pid "$BROKER_PID" --queue-prefix "l$r" \
        latency --rate "${RATE:-10000}" --batch 10 --producers "${PROD:-16}" \
        --consumers "${CONS:-4}" --partitions 10 --duration 10 --warmup 2
    broker_stop
done
