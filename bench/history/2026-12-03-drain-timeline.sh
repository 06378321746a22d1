#!/usr/bin/env bash
# usage: 2026-12-03-drain-timeline.sh BROKER_BIN PARTS PREFILL CLAIM [MAXSECS]
# One group drain (queen-bench drain --spread --consumer-group scale, pop b100 + ack,
# 10 conns) on a private PostgreSQL and a fresh broker, with the broker's pop counters
# sampled every second: messages delivered and empty pops per second, to see whether a
# many-partition drain is slow throughout or only in its tail. SQL_OVERRIDE=<file> is
# applied with psql -f after boot (A/B of sql/functions without a rebuild).
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")/.." && pwd)
source "$BENCH_DIR/lib.sh"
WORKERS=2; POOL=8
TMP=$(mktemp -d /tmp/queen-timeline.XXXXXX); chmod 755 "$TMP"
trap bench_cleanup EXIT
pg_start
broker_start "$1"
[ -n "${SQL_OVERRIDE:-}" ] && "${PSQL[@]}" -d queen -f "$SQL_OVERRIDE" >/dev/null
sample() {
    curl -s "$URL/metrics/prometheus" | awk '/^queen_cluster_pop_messages(_total)?[ {]/ {m+=$NF} /^queen_shard_pop_empty(_total)?[ {]/ {e+=$NF}
        /^queen_cluster_pop_requests(_total)?[ {]/ {r+=$NF} END {printf "%d %d %d\n", m, e, r}'
}
( prev=$(sample); t=0
  while sleep 1; do
      cur=$(sample); t=$((t + 1))
      set -- $prev $cur
      echo "t=${t}s delivered $(( $4 - $1 ))/s empty $(( $5 - $2 ))/s pops $(( $6 - $3 ))/s"
      prev=$cur
  done ) &
SAMPLER=$!
/tmp/target-bench/release/queen-bench drain --consumer-group scale --prefill "$3" --spread --batch 100 \
    --conns 10 --claim "$4" --max-secs "${5:-120}" --partitions "$2" --url "$URL" --pid "$BROKER_PID" \
    --pg-pid "$PGPID" | grep -v '^{' || true
kill "$SAMPLER"
# POST_SQL=<file>: run after the drain against the drained database (timings of an
# empty pop's statements, say).
[ -n "${POST_SQL:-}" ] && psql -h 127.0.0.1 -p "$PGPORT" -U postgres -X -d queen -f "$POST_SQL"
true
