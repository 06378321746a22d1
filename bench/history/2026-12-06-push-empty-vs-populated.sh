#!/usr/bin/env bash
# Push b100 c50 p1000 on an emptied queen.messages against the same push onto the rows
# the rounds before it left (issue 18: what run.sh's PUSH_ON_EMPTY changes). One
# PostgreSQL and one broker; ROUNDS pairs, each "populated" run right after the
# previous run's rows, each "empty" run after TRUNCATE queen.messages, a CHECKPOINT
# before every run. BIN (broker binary), DB_POOL_SIZE (20). Prints one line per run.
set -uo pipefail
BENCH_DIR=$(cd "$(dirname "$0")/.." && pwd)
source $BENCH_DIR/lib.sh
WORKERS=2; POOL=${DB_POOL_SIZE:-20}
TMP=$(mktemp -d /tmp/queen-empty.XXXXXX); chmod 755 $TMP
trap bench_cleanup EXIT
pg_start
BIN=${BIN:-$(dirname "$BENCH_DIR")/target/release/queen}
broker_start "$BIN" || exit 1
QB=/tmp/target-bench/release/queen-bench
q() { "${PSQL[@]}" -d queen -c "$1"; }
push() {
  checkpoint
  local rows; rows=$(q "SELECT count(*) FROM queen.messages")
  $QB --url $URL --pid $BROKER_PID --pg-pid $PGPID --json push --batch 100 --conns 50 \
      --partitions 1000 --duration 10 --warmup 2 --payload-bytes 100 \
    | python3 -c "import json,sys; d=json.load(sys.stdin); print('$1', 'rows before', $rows, round(d['msg_per_s']), 'msg/s pg', round(d['proc'].get('pg_cpu_pct') or 0), '% broker', round(d['proc'].get('broker_cpu_pct') or 0), '%')"
}
push warm-up
for r in $(seq 1 "${ROUNDS:-3}"); do
  push populated
  q "TRUNCATE queen.messages" >/dev/null
  push empty
done
