#!/usr/bin/env bash
# usage: 2026-12-02-candidates.sh BROKER_BIN drain PARTS PREFILL MAXSECS CLAIM
#        2026-12-02-candidates.sh BROKER_BIN push  PARTS BATCH SECS
# One run on a private PostgreSQL with pg_stat_statements (track=all, so the statements
# inside the pop functions are counted) and a fresh broker (NUM_WORKERS=2 DB_POOL_SIZE=8).
# drain: queen-bench drain --consumer-group scale --spread --batch 100 --conns 10
#        --claim CLAIM; then PostgreSQL time per call of pop_compact and of its
#        pop_candidates statement, and 20 timed pop_candidates calls on the drained queue
#        (EXPLAIN ANALYZE BUFFERS of one through auto_explain -> $OUT/explain.log).
# push:  queen-bench push --batch BATCH --conns 50 --partitions PARTS; then the
#        partition_lookup update counts (n_tup_upd, n_tup_hot_upd).
# Run the load under flock /tmp/bench.lock; it stops what it starts. OUT (default
# /tmp/cand-out) keeps the figures.
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")/.." && pwd)
source "$BENCH_DIR/lib.sh"
WORKERS=2; POOL=8
QB=${QB:-/tmp/target-bench/release/queen-bench}
[ -x "$QB" ] || QB=/tmp/target-bench/ci/queen-bench
OUT=${OUT:-/tmp/cand-out}; mkdir -p "$OUT"
TMP=$(mktemp -d /tmp/queen-cand.XXXXXX); chmod 755 "$TMP"
trap bench_cleanup EXIT
pg_start
printf "shared_preload_libraries = 'pg_stat_statements'\npg_stat_statements.track = 'all'\n" >>"$PGDATA/postgresql.conf"
runuser -u postgres -- "$PGBIN/pg_ctl" -D "$PGDATA" -l "$TMP/pg.log" -w -m fast restart >/dev/null
PGPID=$(head -1 "$PGDATA/postmaster.pid")
"${PSQL[@]}" -d queen -c "CREATE EXTENSION pg_stat_statements"
broker_start "$1"
# SQL_OVERRIDE="f1 f2 ...": psql -f each after boot (a branch's sql/ on another binary)
for f in ${SQL_OVERRIDE:-}; do "${PSQL[@]}" -d queen -v ON_ERROR_STOP=1 -f "$f" >/dev/null; done
checkpoint
PSS="select calls, round((total_exec_time/calls)::numeric, 3) as ms_per_call, left(regexp_replace(query, '\s+', ' ', 'g'), 70) from pg_stat_statements where query ilike"
case "$2" in
drain)
    flock /tmp/bench.lock "$QB" drain --consumer-group scale --prefill "$4" --spread --batch 100 \
        --conns 10 --max-secs "$5" --partitions "$3" --claim "$6" --url "$URL" \
        --pid "$BROKER_PID" --pg-pid "$PGPID" --json 2>"$OUT/qb.err" | python3 -c 'import json,sys
for l in sys.stdin:
  if l.startswith("{"):
    r=json.loads(l); print("RESULT parts", r.get("params",{}).get("partitions"), "msg/s", round(r.get("msg_per_s") or 0), "errors", r.get("errors"), "verify", r.get("verify"))' || true
    "${PSQL[@]}" -d queen -c "$PSS '%pop_compact(%' and query not ilike '%pg_stat%'" \
        -c "$PSS '%from queen.pop_candidates(%' and query not ilike '%pg_stat%' order by calls desc limit 3"
    "${PSQL[@]}" -d queen -c "select count(*) as left_in_queue from queen.messages m join queen.partition_lookup pl on pl.partition_id = m.partition_id join queen.partition_consumers pc on pc.partition_id = m.partition_id and pc.consumer_group = 'scale' where (m.created_at, m.id) > (pc.last_consumed_created_at, pc.last_consumed_id)"
    "${PSQL[@]}" -d queen -c "select pg_stat_statements_reset()" >/dev/null
    Q="select count(*) from queen.pop_candidates((select array_agg(id) from queen.queues where name like '%drain%'), null, 'scale', now(), 12)"
    # one session: the first call compiles and plans, the other 20 reuse the cached plans
    QA=(); for _ in $(seq 1 21); do QA+=(-c "$Q"); done
    "${PSQL[@]}" -d queen -c "select pg_stat_statements_reset()" "${QA[@]}" >/dev/null
    "${PSQL[@]}" -d queen -c "$PSS '%from queen.pop_candidates(%' and query not ilike '%pg_stat%' order by calls desc limit 3"
    "${PSQL[@]}" -d queen -c "LOAD 'auto_explain'" -c "SET auto_explain.log_min_duration=0" \
        -c "SET auto_explain.log_nested_statements=on" -c "SET auto_explain.log_analyze=on" \
        -c "SET auto_explain.log_buffers=on" -c "$Q" -c "$Q" >/dev/null
    cp "$TMP/pg.log" "$OUT/explain.log"
    ;;
push)
    "${PSQL[@]}" -d queen -c "select pg_stat_reset()" >/dev/null
    flock /tmp/bench.lock "$QB" push --batch "$4" --conns 50 --partitions "$3" --duration "$5" \
        --url "$URL" --pid "$BROKER_PID" --pg-pid "$PGPID" --json 2>"$OUT/qb.err" | python3 -c 'import json,sys
for l in sys.stdin:
  if l.startswith("{"):
    r=json.loads(l); print("RESULT", r.get("key"), "msg/s", round(r.get("msg_per_s") or 0), "errors", r.get("errors"))' || true
    sleep 1
    "${PSQL[@]}" -d queen -c "select relname, n_tup_upd, n_tup_hot_upd, round(100.0*n_tup_hot_upd/nullif(n_tup_upd,0),1) as hot_pct from pg_stat_user_tables where relname in ('partition_lookup','partitions')"
    "${PSQL[@]}" -d queen -c "$PSS '%push_typed(%' and query not ilike '%pg_stat%' order by calls desc limit 2"
    ;;
esac
