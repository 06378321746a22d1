#!/usr/bin/env bash
# Throw-away PostgreSQL + behaviour tests for the files of sql/ORDER.
#   sql/test/run.sh            # all tests + throughput check
#   SKIP_BENCH=1 sql/test/run.sh
# Env: QUEEN_SQL_TEST_PORT (default: a free port the kernel picks), QUEEN_SQL_TEST_DIR (default /tmp/sqlwork/test-$$),
#      KEEP=1 leaves the server running (prints how to stop it).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
SQLDIR="$(dirname "$HERE")"
# A fixed port collides with whatever else holds it (a broker test's cluster,
# a developer's server); by default take one the kernel reports free.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT="${QUEEN_SQL_TEST_PORT:-$(free_port)}"
BASE="${QUEEN_SQL_TEST_DIR:-/tmp/sqlwork/test-$$}"
DATA="$BASE/data"

find_bin() {
  local b="$1"
  if command -v "$b" >/dev/null 2>&1; then command -v "$b"; return; fi
  local d; d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
  [ -n "$d" ] && [ -x "$d/$b" ] && { echo "$d/$b"; return; }
  echo "missing $b" >&2; exit 1
}
INITDB="$(find_bin initdb)"; PGCTL="$(find_bin pg_ctl)"
PSQL_BIN="$(find_bin psql)"; PGBENCH="$(find_bin pgbench 2>/dev/null || true)"

as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

mkdir -p "$BASE"
[ "$(id -u)" = 0 ] && chown postgres "$BASE" "$(dirname "$BASE")" 2>/dev/null || true
if ! as_pg "$INITDB" -D "$DATA" -U postgres -A trust >"$BASE/initdb.log" 2>&1; then
  echo "sql/test: initdb failed in $DATA:" >&2; tail -20 "$BASE/initdb.log" >&2; exit 1
fi
# A start can lose its port to a racing process between the probe and the
# bind; then it retries once on a fresh one (unless the port was asked for).
started=0
for attempt in 1 2; do
  if as_pg "$PGCTL" -D "$DATA" -w -l "$BASE/pg.log" \
    -o "-p $PORT -k $BASE -c listen_addresses=127.0.0.1 -c max_connections=60 -c fsync=off -c synchronous_commit=on -c shared_buffers=256MB" start >/dev/null; then
    started=1; break
  fi
  echo "sql/test: PostgreSQL did not start on port $PORT (attempt $attempt); its log:" >&2
  tail -20 "$BASE/pg.log" >&2 || true
  [ -n "${QUEEN_SQL_TEST_PORT:-}" ] && break
  PORT="$(free_port)"
done
if [ "$started" != 1 ]; then rm -rf "$BASE"; exit 1; fi

stop() {
  if [ "${KEEP:-0}" = 1 ]; then
    echo "server kept: $PGCTL -D $DATA stop (as postgres)"; return
  fi
  as_pg "$PGCTL" -D "$DATA" -m fast stop >/dev/null || true
  rm -rf "$BASE"
}
trap stop EXIT

export PGHOST=127.0.0.1 PGPORT="$PORT" PGUSER=postgres PGDATABASE=postgres
PSQL=("$PSQL_BIN" -X -q -v ON_ERROR_STOP=1)

# The broker's list and order (sql/ORDER, also read by src/store/schema.rs).
# Pass 1 is a fresh boot; pass 2 a reboot, where the broker's ledger skips the
# schema files and re-applies the rest (the function files must be idempotent).
mapfile -t FILES < <(grep -v -e '^#' -e '^[[:space:]]*$' "$SQLDIR/ORDER")
echo "== apply sql/ORDER, then again without the schema files (idempotency)"
for pass in 1 2; do
  for f in "${FILES[@]}"; do
    [ "$pass" = 2 ] && [[ "$f" == schema/* ]] && continue
    "${PSQL[@]}" -c "SET client_min_messages=warning" -f "$SQLDIR/$f" >/dev/null
  done
done

fail=0
for t in "$HERE"/[0-9][0-9]_*.sql; do
  name="$(basename "$t")"
  if "${PSQL[@]}" -c "SET client_min_messages=warning" -f "$t" >"$BASE/$name.out" 2>&1; then
    echo "ok   $name"
  else
    echo "FAIL $name"; sed 's/^/     /' "$BASE/$name.out" | tail -30; fail=1
  fi
done

echo "== concurrent pushers + autoAck consumer on one partition (append order)"
"${PSQL[@]}" -f "$HERE/concurrency_setup.sql" >/dev/null
pids=()
for w in 1 2 3 4; do
  ( for i in $(seq 1 60); do
      "${PSQL[@]}" -c "SELECT qt.push_n('conc.q', 'P', 'w${w}-${i}-', 10)" >/dev/null
    done ) &
  pids+=($!)
done
( for i in $(seq 1 400); do
    "${PSQL[@]}" -Atc "INSERT INTO qt.consumed SELECT m->>'id' FROM jsonb_array_elements(queen.pop('{\"queue\":\"conc.q\",\"group\":\"c1\",\"batch\":7,\"autoAck\":true}')->'messages') m" >/dev/null
  done ) &
cons=$!
for p in "${pids[@]}"; do wait "$p"; done
wait "$cons"
if "${PSQL[@]}" -f "$HERE/concurrency_check.sql" >"$BASE/conc.out" 2>&1; then
  echo "ok   concurrency"
else
  echo "FAIL concurrency"; tail -20 "$BASE/conc.out"; fail=1
fi

if [ "${SKIP_BENCH:-0}" != 1 ] && [ -n "$PGBENCH" ]; then
  echo "== throughput (pgbench, 2 clients, 10 s each)"
  "${PSQL[@]}" -f "$HERE/bench_setup.sql" >/dev/null
  for n in 100 1000; do
    "${PSQL[@]}" -c "SELECT qt.bench_prepare($n)" >/dev/null
    out="$("$PGBENCH" -n -c 2 -j 2 -T 10 -f "$HERE/bench_push.sql" -D n=$n 2>&1)"
    tps="$(echo "$out" | sed -n 's/^tps = \([0-9.]*\).*/\1/p')"
    echo "push_batch $n-item batches: tps=$tps rows/s=$(awk -v t="$tps" -v n=$n 'BEGIN{printf "%d", t*n}')"
  done
  out="$("$PGBENCH" -n -c 2 -j 2 -T 10 -f "$HERE/bench_insert.sql" 2>&1)"
  tps="$(echo "$out" | sed -n 's/^tps = \([0-9.]*\).*/\1/p')"
  echo "plain INSERT 100 rows: tps=$tps rows/s=$(awk -v t="$tps" 'BEGIN{printf "%d", t*100}')"
  "${PSQL[@]}" -f "$HERE/bench_pop.sql" >/dev/null
  for f in bench_pop_new bench_pop_idle; do
    lat="$("$PGBENCH" -n -c 1 -T 5 -f "$HERE/$f.sql" 2>&1 | sed -n 's/^latency average = \([0-9.]*\).*/\1/p')"
    echo "pop, queue with 10,000 partitions ($f): ${lat} ms/pop"
  done
fi

[ "$fail" = 0 ] && echo "ALL TESTS PASSED" || { echo "SOME TESTS FAILED"; exit 1; }
