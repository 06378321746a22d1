#!/usr/bin/env bash
# usage: 2026-12-02-push-b10-statements.sh BROKER_BIN [BATCH] [PARTS] [SECS]
# Where PostgreSQL spends a push (issue 18's b10 gap): queen-bench push (default b10,
# 50 connections, 1,000 partitions, 16 s, no warm-up) on a private PostgreSQL with
# pg_stat_statements (track=all) and a fresh broker (NUM_WORKERS=2 DB_POOL_SIZE=8, as
# compare.sh). Prints the push result, the fused batch size (requests and items per
# push_typed call, from the broker's shard metrics), push_typed's top-level time, its
# nested statements by total time, and WAL written per message. SQL_OVERRIDE=<file>
# is applied with psql -f after boot (A/B of sql/functions/push.sql without a rebuild).
# Takes /tmp/bench.lock for the load only; stops what it starts.
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")/.." && pwd)
source "$BENCH_DIR/lib.sh"
WORKERS=2; POOL=8
BATCH=${2:-10}; PARTS=${3:-1000}; SECS=${4:-16}
QB=${QB:-/tmp/target-bench/release/queen-bench}
TMP=$(mktemp -d /tmp/queen-b10.XXXXXX); chmod 755 "$TMP"
trap bench_cleanup EXIT
PG_EXTRA_OPTS="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all"
pg_start
broker_start "$1"
[ -n "${SQL_OVERRIDE:-}" ] && "${PSQL[@]}" -d queen -f "$SQL_OVERRIDE" >/dev/null
"${PSQL[@]}" -d queen -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null
# a short untimed round creates the partitions, so the measured round only appends
"$QB" push --batch "$BATCH" --conns 50 --partitions "$PARTS" --duration 3 --warmup 0 \
    --url "$URL" --json >/dev/null 2>&1 || true
checkpoint
"${PSQL[@]}" -d queen -c "SELECT pg_stat_statements_reset()" >/dev/null
lsn0=$("${PSQL[@]}" -d queen -Atc "SELECT pg_current_wal_lsn()")
n0=$("${PSQL[@]}" -d queen -Atc "SELECT count(*) FROM queen.messages")
fused() { curl -s "$URL/metrics/prometheus" | awk '/^queen_shard_push_batches/ {b+=$NF} /^queen_shard_push_fused_requests/ {r+=$NF} END {print b, r}'; }
read -r b0 r0 <<<"$(fused)"
flock /tmp/bench.lock "$QB" push --batch "$BATCH" --conns 50 --partitions "$PARTS" \
    --duration "$SECS" --warmup 0 --url "$URL" --pid "$BROKER_PID" --pg-pid "$PGPID" --json \
  | python3 -c 'import json,sys
for l in sys.stdin:
  if l.startswith("{"):
    r=json.loads(l); print("PUSH msg/s", round(r.get("msg_per_s") or 0), "errors", r.get("errors"),
      "cpu", r.get("cpu"))'
read -r b1 r1 <<<"$(fused)"
n1=$("${PSQL[@]}" -d queen -Atc "SELECT count(*) FROM queen.messages")
lsn1=$("${PSQL[@]}" -d queen -Atc "SELECT pg_current_wal_lsn()")
python3 -c "
b, r, n = $b1 - $b0, $r1 - $r0, $n1 - $n0
print('FUSED batches', b, 'requests', r, 'req/batch', round(r / max(b, 1), 2), 'items/batch', round(n / max(b, 1), 1))"
"${PSQL[@]}" -d queen -Atc "SELECT 'WAL bytes/msg', round(pg_wal_lsn_diff('$lsn1', '$lsn0') / greatest($n1 - $n0, 1))"
"${PSQL[@]}" -d queen -F ' | ' -c "
SELECT 'PUSH calls', sum(calls), 'total_ms', round(sum(total_exec_time)::numeric, 1),
       'us/msg', round((sum(total_exec_time) * 1000 / greatest($n1 - $n0, 1))::numeric, 1)
  FROM pg_stat_statements WHERE toplevel AND query ILIKE '%push_typed%'"
echo "nested statements by total time (us per message over the round):"
"${PSQL[@]}" -d queen -F ' | ' -c "
SELECT calls, round(total_exec_time::numeric, 1) AS total_ms,
       round((total_exec_time * 1000 / greatest($n1 - $n0, 1))::numeric, 2) AS us_per_msg,
       wal_records, regexp_replace(left(query, 100), '\s+', ' ', 'g')
  FROM pg_stat_statements WHERE NOT toplevel
 ORDER BY total_exec_time DESC LIMIT 12"
echo "top-level statements by total time:"
"${PSQL[@]}" -d queen -F ' | ' -c "
SELECT calls, round(total_exec_time::numeric, 1) AS total_ms,
       regexp_replace(left(query, 90), '\s+', ' ', 'g')
  FROM pg_stat_statements WHERE toplevel
 ORDER BY total_exec_time DESC LIMIT 8"
