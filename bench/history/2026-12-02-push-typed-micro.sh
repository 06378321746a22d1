#!/usr/bin/env bash
# usage: 2026-12-02-push-typed-micro.sh BROKER_BIN [SQL_OVERRIDE]
# PostgreSQL's own cost of one queen.push_typed call, without the broker's load or any
# concurrency (issue 18's b10 gap): a private PostgreSQL, the schema from a broker boot
# (the broker is stopped before timing), then in one session CALLS calls of PAIRS
# partitions x PER items each (defaults 2000 x 3 x 10 and 400 x 3 x 100), each call its
# own transaction (synchronous_commit=off here: the timing is CPU, not fsync). Prints
# ms per call and us per item for each shape. SQL_OVERRIDE is applied with psql -f
# first (A/B of sql/functions/push.sql without a rebuild). Stops what it starts.
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")/.." && pwd)
source "$BENCH_DIR/lib.sh"
WORKERS=2; POOL=4
TMP=$(mktemp -d /tmp/queen-micro.XXXXXX); chmod 755 "$TMP"
trap bench_cleanup EXIT
PG_EXTRA_OPTS="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all"
pg_start
broker_start "$1"
broker_stop
[ -n "${2:-}" ] && "${PSQL[@]}" -d queen -f "$2" >/dev/null
"${PSQL[@]}" -d queen -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null
cat > "$TMP/call.sql" <<'SQL'
-- one call: :pairs partitions of queue micro, :per items each
SELECT pids FROM queen.push_typed(NULL,
    (SELECT array_agg('micro'::text) FROM generate_series(1, :pairs)),
    (SELECT array_agg('p' || (g + :round * :pairs) % 30) FROM generate_series(1, :pairs) g),
    (SELECT array_agg((g - 1) / :per + 1) FROM generate_series(1, :pairs * :per) g),
    (SELECT array_agg(gen_random_uuid()) FROM generate_series(1, :pairs * :per)),
    (SELECT array_agg(gen_random_uuid()::text) FROM generate_series(1, :pairs * :per)),
    NULL::uuid[],
    (SELECT array_agg('{"n": 1, "s": "0123456789012345678901234567890123456789"}'::jsonb)
       FROM generate_series(1, :pairs * :per)),
    NULL::boolean[], NULL::text[]) \gset
SQL
shape() {
    local calls=$1 pairs=$2 per=$3
    # warm the session's plans and create the partitions, then time
    {
        echo "SET synchronous_commit = off;"
        for r in 1 2 3; do echo "\\set round $r"; echo "\\set pairs $pairs"; echo "\\set per $per"; echo "\\i $TMP/call.sql"; done
        echo "SELECT pg_stat_statements_reset() \\gset"
        echo "SELECT extract(epoch FROM clock_timestamp()) AS t0 \\gset"
        for r in $(seq 1 "$calls"); do echo "\\set round $r"; echo "\\i $TMP/call.sql"; done
        echo "SELECT round(((extract(epoch FROM clock_timestamp()) - :t0) * 1000 / $calls)::numeric, 3) AS ms_per_call,"
        echo "       round(((extract(epoch FROM clock_timestamp()) - :t0) * 1e6 / ($calls * $pairs * $per))::numeric, 2) AS us_per_item \\gset"
        echo "\\echo SHAPE calls $calls pairs $pairs per $per ms/call :ms_per_call us/item :us_per_item"
    } | "${PSQL[@]}" -d queen -q -v ON_ERROR_STOP=1 | grep SHAPE
    # where a call's time went: push_typed's nested statements, ms per call
    "${PSQL[@]}" -d queen -At -F ' | ' -c "
SELECT round((total_exec_time / $calls)::numeric, 3) AS ms_per_call, calls,
       regexp_replace(left(query, 70), '\s+', ' ', 'g')
  FROM pg_stat_statements
 WHERE query !~* 'pg_stat_statements|extract.epoch|SET synchronous'
 ORDER BY total_exec_time DESC LIMIT 8"
}
shape 2000 3 10
shape 400 3 100
shape 2000 1 34
