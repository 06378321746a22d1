#!/usr/bin/env bash
# What a Prometheus scrape costs a broker under push load: push b100 c50 p1000 for
# DUR seconds (60: the push-rate window's length) with no scrape, then with a scrape
# of /metrics/prometheus every SCRAPE_EVERY seconds (5: the snapshot cache's TTL), ROUNDS
# pairs; after each run, the time of queen.metrics_snapshot itself (3 calls, ms) over the
# rows just pushed. One PostgreSQL, one broker, messages truncated before each run.
# BIN (broker binary), DB_POOL_SIZE (20). Prints one line per run.
set -uo pipefail
BENCH_DIR=$(cd "$(dirname "$0")/.." && pwd)
source $BENCH_DIR/lib.sh
WORKERS=2; POOL=${DB_POOL_SIZE:-20}; DUR=${DUR:-60}; EVERY=${SCRAPE_EVERY:-5}
TMP=$(mktemp -d /tmp/queen-scrape.XXXXXX); chmod 755 $TMP
trap bench_cleanup EXIT
pg_start
BIN=${BIN:-$(dirname "$BENCH_DIR")/target/release/queen}
broker_start "$BIN" || exit 1
QB=/tmp/target-bench/release/queen-bench
q() { "${PSQL[@]}" -d queen -Atc "$1"; }
snapshot_ms() {
  for _ in 1 2 3; do
    q "EXPLAIN (ANALYZE, FORMAT JSON) SELECT queen.metrics_snapshot('{}')" \
      | python3 -c "import json,sys; print(round(json.load(sys.stdin)[0]['Execution Time']))"
  done | paste -sd' '
}
run() {
  q "TRUNCATE queen.messages" >/dev/null; checkpoint
  local scraper=
  if [ "$1" = scraped ]; then
    ( while sleep "$EVERY"; do curl -s -o /dev/null "$URL/metrics/prometheus"; done ) &
    scraper=$!
  fi
  local line
  line=$($QB --url $URL --pid $BROKER_PID --pg-pid $PGPID --json push --batch 100 --conns 50 \
      --partitions 1000 --duration "$DUR" --warmup 2 --payload-bytes 100 \
    | python3 -c "import json,sys; d=json.load(sys.stdin); print(round(d['msg_per_s']), 'msg/s, pg', round(d['proc'].get('pg_cpu_pct') or 0), '% broker', round(d['proc'].get('broker_cpu_pct') or 0), '%')")
  [ -n "$scraper" ] && kill "$scraper" 2>/dev/null
  echo "$1: $line; rows $(q "SELECT count(*) FROM queen.messages"), snapshot ms $(snapshot_ms)"
}
for _ in $(seq 1 "${ROUNDS:-2}"); do
  run unscraped
  run scraped
done
