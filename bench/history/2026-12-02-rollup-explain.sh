#!/usr/bin/env bash
# usage: 2026-12-02-rollup-explain.sh PARTS PER NEW [cursor] [explain]
# Cost of stats roll-up rounds, old (main's sql/functions/stats.sql, OLD_SQL) against
# new (this tree's), on one seeded table: queue `big` with PARTS partitions and PER
# rows each (written in runs of 100 per partition, as push b100 does, then vacuumed),
# counted by a forced roll-up, then NEW more rows per partition appended and not
# vacuumed (what a cycle of push leaves: fresh rows without visibility-map bits).
# "cursor": every partition has a queue-mode cursor at half of its rows at the
# counted roll-up, moved NEW rows forward after it (a consumer keeping pace behind a
# backlog). Each variant runs in a transaction that loads its functions, times one
# round (batchSize 1000, the last of a cycle: queue rows included) and the whole
# cycle (ceil(PARTS/1000) rounds), and rolls back; variants alternate, twice each.
# "explain": auto_explain (nested, analyze, buffers) of one round of each variant
# into /tmp/rollup-exp/<variant>.log. No broker; the load lock is not needed (no
# throughput figure), but it is taken to stay off the lead's benchmarks.
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")/.." && pwd)
ROOT=$(dirname "$BENCH_DIR")
source "$BENCH_DIR/lib.sh"
PARTS=$1; PER=$2; NEW=$3; CURSOR=${4:-}; EXPLAIN=${5:-}
OLD_SQL=${OLD_SQL:-/tmp/stats_old.sql}
NEW_SQL=${NEW_SQL:-$ROOT/sql/functions/stats.sql}
TMP=$(mktemp -d /tmp/queen-rollupexp.XXXXXX); chmod 755 "$TMP"
trap bench_cleanup EXIT
exec 9>/tmp/bench.lock; flock 9
pg_start
P=("${PSQL[@]}" -d queen -v ON_ERROR_STOP=1)
for f in $(grep -v -e '^#' -e '^[[:space:]]*$' "$ROOT/sql/ORDER"); do
    "${P[@]}" -c "SET client_min_messages=warning" -f "$ROOT/sql/$f" >/dev/null
done
bench_log "seeding $PARTS partitions x $PER rows"
"${P[@]}" <<SQL
INSERT INTO queen.queues (name) VALUES ('big');
INSERT INTO queen.partitions (queue_id, name)
SELECT q.id, 'p' || g FROM queen.queues q, generate_series(1, $PARTS) g;
INSERT INTO queen.partition_lookup (partition_id, queue_id) SELECT id, queue_id FROM queen.partitions;
INSERT INTO queen.messages (id, transaction_id, partition_id, payload, created_at)
SELECT gen_random_uuid(), 't' || g, p.id, '{"k": "some payload of a hundred bytes or so, as the bench pushes it"}',
       now() - interval '2 hours' + g * interval '1 ms'
  FROM queen.partitions p, generate_series(1, $PER) g
 ORDER BY g / 100, p.id, g;
UPDATE queen.partition_lookup pl SET last_message_id = x.id, last_message_created_at = x.created_at,
       updated_at = now()
  FROM (SELECT DISTINCT ON (partition_id) partition_id, id, created_at FROM queen.messages
         ORDER BY partition_id, created_at DESC, id DESC) x
 WHERE x.partition_id = pl.partition_id;
SQL
if [ "$CURSOR" = cursor ]; then
    "${P[@]}" <<SQL
INSERT INTO queen.partition_consumers (partition_id, consumer_group, last_consumed_id,
                                       last_consumed_created_at, last_consumed_at)
SELECT pt.id, '__QUEUE_MODE__', m.id, m.created_at, now()
  FROM queen.partitions pt
  CROSS JOIN LATERAL (SELECT id, created_at FROM queen.messages WHERE partition_id = pt.id
                       ORDER BY created_at, id OFFSET $PER / 2 LIMIT 1) m;
SQL
fi
"${P[@]}" -c "VACUUM ANALYZE" >/dev/null
"${P[@]}" -f "$NEW_SQL" >/dev/null
"${P[@]}" -c "SELECT queen.stats_rollup('{\"batchSize\": 1000000, \"force\": true}')" >/dev/null
"${P[@]}" -c "SELECT 'counted', sum(total), sum(after_ref) FROM queen.partition_stats"
bench_log "appending $NEW rows per partition"
"${P[@]}" <<SQL
INSERT INTO queen.messages (id, transaction_id, partition_id, payload, created_at)
SELECT gen_random_uuid(), 'n' || g, p.id, '{"k": "some payload of a hundred bytes or so, as the bench pushes it"}',
       now() - interval '1 hour' + g * interval '1 ms'
  FROM queen.partitions p, generate_series(1, $NEW) g
 ORDER BY g / 100, p.id, g;
UPDATE queen.partition_lookup pl SET last_message_id = x.id, last_message_created_at = x.created_at,
       updated_at = now()
  FROM (SELECT DISTINCT ON (partition_id) partition_id, id, created_at FROM queen.messages
         ORDER BY partition_id, created_at DESC, id DESC) x
 WHERE x.partition_id = pl.partition_id;
SQL
if [ "$CURSOR" = cursor ]; then
    "${P[@]}" <<SQL
UPDATE queen.partition_consumers pc SET last_consumed_id = m.id, last_consumed_created_at = m.created_at,
       last_consumed_at = now()
  FROM queen.partitions pt
  CROSS JOIN LATERAL (SELECT id, created_at FROM queen.messages WHERE partition_id = pt.id
                       ORDER BY created_at, id OFFSET $PER / 2 + $NEW LIMIT 1) m
 WHERE pc.partition_id = pt.id;
SQL
fi
"${P[@]}" -c "CHECKPOINT" >/dev/null
sleep 6  # past the stats margin, so the counted roll-up's scans are older than the appends
# what a count from scratch says (the check lines of both variants must match it)
"${P[@]}" -c "SELECT 'live', (SELECT count(*) FROM queen.messages),
       (SELECT count(*) FROM queen.messages m
         LEFT JOIN queen.partition_consumers pc ON pc.partition_id = m.partition_id
        WHERE pc.partition_id IS NULL
           OR (m.created_at, m.id) > (pc.last_consumed_created_at, pc.last_consumed_id))"
ROUNDS=$(( (PARTS + 999) / 1000 ))
ARG='{"batchSize": 1000, "reconcileMs": 36000000, "last": true}'
MID='{"batchSize": 1000, "reconcileMs": 36000000}'
run_variant() {  # $1 name, $2 sql file
    local out
    out=$({
        echo "BEGIN;"
        echo "SET client_min_messages=warning;"
        echo "\\i $2"
        echo "\\timing on"
        echo "SELECT queen.stats_rollup('$ARG');"
        echo "ROLLBACK;"
        echo "BEGIN;"
        echo "SET client_min_messages=warning;"
        echo "\\i $2"
        echo "\\timing on"
        for _ in $(seq 2 "$ROUNDS"); do echo "SELECT queen.stats_rollup('$MID');"; done
        echo "SELECT queen.stats_rollup('$ARG');"
        echo "SELECT 'check', sum(total), sum(after_ref) FROM queen.partition_stats;"
        echo "SELECT 'ingested', details->>'ingestPending', (SELECT data->>'ingested' FROM queen.stats_history ORDER BY bucket_time DESC LIMIT 1) FROM queen.stats WHERE stat_type = 'queue';"
        echo "ROLLBACK;"
    } | "${P[@]}" 2>&1)
    local times
    times=$(echo "$out" | grep -o 'Time: [0-9.]* ms' | awk '{print $2}' | tr '\n' ' ')
    echo "$1 round(last) then cycle of $ROUNDS rounds, ms: $times"
    echo "$out" | grep -E '^(check|ingested)' | sed "s/^/$1 /"
}
for i in 1 2; do
    run_variant old "$OLD_SQL"
    run_variant new "$NEW_SQL"
done
if [ "$EXPLAIN" = explain ]; then
    mkdir -p /tmp/rollup-exp
    for v in old new; do
        f=$OLD_SQL; [ $v = new ] && f=$NEW_SQL
        : > "$TMP/pg.log.mark"; before=$(wc -c < "$TMP/pg.log")
        { echo "BEGIN;"; echo "SET client_min_messages=warning;"; echo "\\i $f";
          echo "LOAD 'auto_explain';"; echo "SET auto_explain.log_min_duration = 0;"
          echo "SET auto_explain.log_nested_statements = on;"; echo "SET auto_explain.log_analyze = on;"
          echo "SET auto_explain.log_buffers = on;"
          echo "SELECT queen.stats_rollup('$ARG');"; echo "ROLLBACK;"; } | "${P[@]}" >/dev/null 2>&1
        tail -c +"$((before + 1))" "$TMP/pg.log" > "/tmp/rollup-exp/$v-$PARTS.log"
    done
    bench_log "plans in /tmp/rollup-exp/{old,new}-$PARTS.log"
fi
