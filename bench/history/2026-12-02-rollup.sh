#!/usr/bin/env bash
# usage: 2026-12-02-rollup.sh BROKER_BIN [SECS]
# PostgreSQL time of the stats roll-up under push b100, 50 connections, 100 partitions
# (queen-bench push, SECS seconds, default 32, no warm-up) on a private PostgreSQL with
# pg_stat_statements (track=all) and a fresh broker (NUM_WORKERS=2 DB_POOL_SIZE=20,
# default STATS_INTERVAL_MS). SQL_OVERRIDE=<file> is applied with psql -f after boot
# (A/B of sql/functions/stats.sql without a rebuild). Prints the push result, the
# roll-up's calls and total/mean exec time (top level), that time per 8 s of push,
# and the roll-up's nested statements by total time. Takes /tmp/bench.lock for the
# load only; stops what it starts.
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")/.." && pwd)
source "$BENCH_DIR/lib.sh"
WORKERS=2; POOL=20
SECS=${2:-32}
QB=${QB:-/tmp/target-bench/ci/queen-bench}
[ -x /tmp/target-bench/release/queen-bench ] && QB=/tmp/target-bench/release/queen-bench
TMP=$(mktemp -d /tmp/queen-rollup.XXXXXX); chmod 755 "$TMP"
trap bench_cleanup EXIT
PG_EXTRA_OPTS="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all"
pg_start
broker_start "$1"
[ -n "${SQL_OVERRIDE:-}" ] && "${PSQL[@]}" -d queen -f "$SQL_OVERRIDE"
"${PSQL[@]}" -d queen -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
checkpoint
"${PSQL[@]}" -d queen -c "SELECT pg_stat_statements_reset()" >/dev/null
flock /tmp/bench.lock "$QB" push --batch 100 --conns 50 --partitions 100 --duration "$SECS" \
    --warmup 0 --url "$URL" --pid "$BROKER_PID" --pg-pid "$PGPID" --json \
  | python3 -c 'import json,sys
for l in sys.stdin:
  if l.startswith("{"):
    r=json.loads(l); print("PUSH msg/s", round(r.get("msg_per_s") or 0), "errors", r.get("errors"))'
"${PSQL[@]}" -d queen -F ' | ' -c "
SELECT 'ROLLUP calls', calls, 'total_ms', round(total_exec_time::numeric, 1),
       'mean_ms', round((total_exec_time / greatest(calls, 1))::numeric, 1),
       'ms_per_8s', round((total_exec_time * 8 / $SECS)::numeric, 1)
  FROM pg_stat_statements WHERE toplevel AND query ILIKE '%queen.stats_rollup(%'"
"${PSQL[@]}" -d queen -F ' | ' -c "
SELECT 'PUSH calls', sum(calls), 'total_ms', round(sum(total_exec_time)::numeric, 1)
  FROM pg_stat_statements WHERE toplevel AND query ILIKE '%push_typed%'"
echo "nested statements of the roll-up by total time:"
"${PSQL[@]}" -d queen -F ' | ' -c "
SELECT calls, round(total_exec_time::numeric, 1) AS total_ms,
       round((total_exec_time / greatest(calls, 1))::numeric, 2) AS mean_ms,
       regexp_replace(left(query, 110), '\s+', ' ', 'g')
  FROM pg_stat_statements
 WHERE NOT toplevel AND query ~* '(partition_stats|queen\.stats|stats_history|stats_deleted|job_runs|consumer_groups_metadata|advisory)'
 ORDER BY total_exec_time DESC LIMIT 14"
"${PSQL[@]}" -d queen -c "SELECT 'rows', count(*) FROM queen.messages"
"${PSQL[@]}" -d queen -c "SELECT 'job_runs', count(*), round(avg(extract(epoch FROM finished_at - started_at) * 1000)::numeric, 1) FROM queen.job_runs WHERE job = 'stats'"
