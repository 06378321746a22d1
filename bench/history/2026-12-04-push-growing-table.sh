#!/usr/bin/env bash
# One broker, push scenarios repeated on a growing queen.messages (issue 18: does the
# table growing explain run.sh push ratios below compare.sh?). SCEN="B:P ..." (batch:partitions),
# STATEMENTS=1 with PG_EXTRA_OPTS="-c shared_preload_libraries=pg_stat_statements
# -c pg_stat_statements.track=all": the top statements of each scenario. "fresh" in SCEN: a new database and broker; "restart": a new broker. BIN (broker binary), DB_POOL_SIZE (20). Prints per scenario msg/s, WAL full-page images and MB,
# the table size and autovacuum counts, and what else was active in PostgreSQL meanwhile.
set -uo pipefail
BENCH_DIR=$(cd "$(dirname "$0")/.." && pwd)
source $BENCH_DIR/lib.sh
WORKERS=2; POOL=${DB_POOL_SIZE:-20}
TMP=$(mktemp -d /tmp/queen-grow.XXXXXX); chmod 755 $TMP
trap bench_cleanup EXIT
pg_start
[ -n "${STATEMENTS:-}" ] && q0() { "${PSQL[@]}" -d queen -c "$1"; } && q0 "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null
BIN=${BIN:-$(dirname "$BENCH_DIR")/target/release/queen}
broker_start "$BIN" || exit 1
QB=/tmp/target-bench/release/queen-bench
q() { "${PSQL[@]}" -d queen -c "$1"; }
i=0
for sc in ${SCEN:-100:1000 100:1000}; do
  if [ "$sc" = fresh ]; then
    # a new database (its buffers go back to PostgreSQL's free list) and a new broker
    broker_stop; fresh_db >/dev/null; broker_start "$BIN" || exit 1; echo "-- fresh database and broker"; continue
  fi
  if [ "$sc" = restart ]; then
    # the same database, a new broker (new PostgreSQL sessions, no cached plans)
    broker_stop; broker_start "$BIN" || exit 1; echo "-- new broker"; continue
  fi
  i=$((i+1)); B=${sc%%:*}; P=${sc##*:}
  checkpoint
  w0=$(q "SELECT wal_fpi||' '||wal_bytes FROM pg_stat_wal")
  ( while sleep 0.5; do q "SELECT coalesce(backend_type,'')||': '||left(regexp_replace(query,'\s+',' ','g'),70) FROM pg_stat_activity WHERE state='active' AND pid<>pg_backend_pid() AND query NOT ILIKE '%push_typed%' AND backend_type<>'walwriter'" ; done ) > $TMP/act.$i &
  sp=$!
  r=$($QB --url $URL --pid $BROKER_PID --pg-pid $PGPID --json push --batch ${B:-100} --conns 50 --partitions ${P:-1000} --duration 10 --warmup 2 --payload-bytes 100)
  kill $sp
  w1=$(q "SELECT wal_fpi||' '||wal_bytes FROM pg_stat_wal")
  t=$(q "SELECT n_tup_ins||' av='||autovacuum_count||' aa='||autoanalyze_count||' sz='||pg_size_pretty(pg_total_relation_size('queen.messages')) FROM pg_stat_user_tables WHERE relname='messages' AND schemaname='queen'")
  rate=$(echo "$r" | python3 -c "import json,sys; d=json.load(sys.stdin); print(round(d['msg_per_s']), 'pg', round(d.get('pg_cpu_pct',0)), 'br', round(d.get('broker_cpu_pct',0) or 0))")
  read f0 b0 <<<"$w0"; read f1 b1 <<<"$w1"
  if [ -n "${STATEMENTS:-}" ]; then
    # per-statement time inside push_typed (PG_EXTRA_OPTS must preload pg_stat_statements)
    q "SELECT round(total_exec_time)||' ms '||calls||' calls '||round((total_exec_time/greatest(calls,1))::numeric,3)||' ms/call: '||left(regexp_replace(query,'\s+',' ','g'),90) FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 8"
    q "SELECT pg_stat_statements_reset()" >/dev/null
  fi
  echo "iter $i: $rate  fpi=$((f1-f0)) walMB=$(( (b1-b0)/1048576 )) | $t"
  sort $TMP/act.$i | uniq -c | sort -rn | head -6
done
