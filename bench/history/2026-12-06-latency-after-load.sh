#!/usr/bin/env bash
# Who uses PostgreSQL while run.sh's latency scenario runs after its push and drain
# scenarios on the same broker (issue 18: run.sh's latency r1000 b10 rows ran with
# PostgreSQL at 95-124% of a core in rounds 1-2 and 46% in round 3). One PostgreSQL and
# one broker: push b100 p1000 c50 10 s, the two drains of 200,000, then latency r1000
# b10 (4 producers, 4 consumers, 10 partitions) 10 s while pg_stat_activity is sampled
# every 100 ms; prints the e2e line and the active backends' samples by
# (backend type, application, wait event, statement). BIN (broker binary).
set -uo pipefail
BENCH_DIR=$(cd "$(dirname "$0")/.." && pwd)
source $BENCH_DIR/lib.sh
WORKERS=2; POOL=${DB_POOL_SIZE:-20}
TMP=$(mktemp -d /tmp/queen-lat.XXXXXX); chmod 755 $TMP
trap bench_cleanup EXIT
pg_start
BIN=${BIN:-$(dirname "$BENCH_DIR")/target/release/queen}
broker_start "$BIN" || exit 1
QB=/tmp/target-bench/release/queen-bench
Q=("$QB" --url "$URL" --pid "$BROKER_PID" --pg-pid "$PGPID")
"${Q[@]}" push --batch 100 --conns 50 --partitions 1000 --duration 10 --warmup 2 --payload-bytes 100 | head -1
"${Q[@]}" drain --prefill 200000 --partitions 100 --batch 100 --conns 10 | head -1
"${Q[@]}" drain --prefill 200000 --partitions 100 --batch 100 --conns 10 --auto-ack | head -1
( end=$((SECONDS + 13))
  while [ $SECONDS -lt $end ]; do
    "${PSQL[@]}" -d queen -AtF '|' -c "SELECT backend_type, application_name, coalesce(wait_event_type || ':' || wait_event, 'CPU'),
        regexp_replace(left(query, 50), '\s+', ' ', 'g')
        FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid()
          OR (backend_type <> 'client backend' AND wait_event IS NULL)"
    sleep 0.1
  done >"$TMP/samples" ) &
sampler=$!
"${Q[@]}" latency --rate 1000 --batch 10 --producers 4 --consumers 4 --partitions 10 --duration 10 --warmup 2 | head -3
wait $sampler
echo "active samples by backend, application, wait, statement:"
sort "$TMP/samples" | uniq -c | sort -rn | head -25
