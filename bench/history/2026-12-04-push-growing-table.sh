#!/usr/bin/env bash
# One broker, push scenarios repeated on a growing queen.messages (issue 18: does the
# table growing explain run.sh push ratios below compare.sh?). SCEN="B:P ..." (batch:partitions),
# BIN (broker binary), DB_POOL_SIZE (20). Prints per scenario msg/s, WAL full-page images and MB,
# the table size and autovacuum counts, and what else was active in PostgreSQL meanwhile.
set -uo pipefail
BENCH_DIR=$(cd "$(dirname "$0")/.." && pwd)
source $BENCH_DIR/lib.sh
WORKERS=2; POOL=${DB_POOL_SIZE:-20}
TMP=$(mktemp -d /tmp/queen-grow.XXXXXX); chmod 755 $TMP
trap bench_cleanup EXIT
pg_start
broker_start ${BIN:-$(dirname "$BENCH_DIR")/target/release/queen} || exit 1
QB=/tmp/target-bench/release/queen-bench
q() { "${PSQL[@]}" -d queen -c "$1"; }
i=0
for sc in ${SCEN:-100:1000 100:1000}; do
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
  echo "iter $i: $rate  fpi=$((f1-f0)) walMB=$(( (b1-b0)/1048576 )) | $t"
  sort $TMP/act.$i | uniq -c | sort -rn | head -6
done
