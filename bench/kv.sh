#!/usr/bin/env bash
# bench/kv.sh: the KV targets of issue 14, side by side, medians of RUNS.
#
# Starts a private PostgreSQL and the broker (bench/lib.sh), then RUNS times:
#   1. KV put at RATE ops/s offered (open loop, CONNS connections, one op per
#      POST /api/v1/kv): p50/p99; target p99 < 5 ms at 5,000 ops/s;
#   2. KV get at RATE ops/s over keys a put pass wrote: p50/p99, same target;
#   3. incr closed loop, CONNS connections, KEYS_INCR keys (1 = one hot key);
#   4. the raw PostgreSQL ceiling: the same CONNS connections straight to
#      PostgreSQL, each a loop of one-row INSERT ... ON CONFLICT DO UPDATE
#      SET v = v + 1 on the same number of keys; target: incr >= 50% of it.
# Prints one line per run and a markdown table of the medians; raw JSON lines
# go to bench/results/<date>-<commit>-kv.jsonl.
#
#   bench/kv.sh                       # 3 runs, 10 s windows
#   RUNS=1 DUR=3 bench/kv.sh          # smoke test
#
# Environment: RATE (5000), CONNS (50), DUR (10), WARM (2), KEYS (10000),
# KEYS_INCR (1), KV_POOL (the broker's QUEEN_KV_POOL_SIZE, default the
# broker's own), BROKER_BIN (default <repo>/target/release/queen), KVB
# (default /tmp/target-bench/release/kv-bench; build it with
# `cd bench && CARGO_TARGET_DIR=/tmp/target-bench cargo build --release`),
# NUM_WORKERS (2), DB_POOL_SIZE (16: the broker's default, so the KV pool
# gets its default 4). Must run as root (PostgreSQL runs as user postgres).
set -euo pipefail

RUNS=${RUNS:-3}
DUR=${DUR:-10}
WARM=${WARM:-2}
RATE=${RATE:-5000}
CONNS=${CONNS:-50}
KEYS=${KEYS:-10000}
KEYS_INCR=${KEYS_INCR:-1}
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$BENCH_DIR")
KVB=${KVB:-/tmp/target-bench/release/kv-bench}
BROKER_BIN=${BROKER_BIN:-${CARGO_TARGET_DIR:-$REPO/target}/release/queen}
WORKERS=${NUM_WORKERS:-2}
POOL=${DB_POOL_SIZE:-16}
[ -n "${KV_POOL:-}" ] && export QUEEN_KV_POOL_SIZE=$KV_POOL

source "$BENCH_DIR/lib.sh"
log() { bench_log "$@"; }
for f in "$KVB" "$BROKER_BIN"; do
    [ -x "$f" ] || { log "missing $f"; exit 1; }
done

COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo nocommit)
mkdir -p "$BENCH_DIR/results"
JSONL="$BENCH_DIR/results/$(date +%F)-$COMMIT-kv.jsonl"
: > "$JSONL"

TMP=$(mktemp -d /tmp/queen-kv-bench.XXXXXX)
chmod 755 "$TMP"
trap bench_cleanup EXIT

pg_start
broker_start "$BROKER_BIN"
PGURL="host=127.0.0.1 port=$PGPORT user=postgres dbname=queen"

field() { python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print(" ".join(str(r[k]) for k in sys.argv[1:]))' "$@"; }
run() { # label args... -> the JSON line (also appended to $JSONL)
    local label=$1
    shift
    "$KVB" "$@" --secs "$DUR" --warm "$WARM" | tee -a "$JSONL"
    log "$label done"
}

PUT99=(); GET99=(); PUT50=(); GET50=(); INCR=(); PGI=()
for r in $(seq 1 "$RUNS"); do
    read -r pr p50 p99 perr < <(run "put-run$r" rate "$URL" --op put --rate "$RATE" --conns "$CONNS" --keys "$KEYS" | field ops_per_s p50_ms p99_ms errors)
    checkpoint
    read -r gr g50 g99 gerr < <(run "get-run$r" rate "$URL" --op get --rate "$RATE" --conns "$CONNS" --keys "$KEYS" | field ops_per_s p50_ms p99_ms errors)
    checkpoint
    read -r ir ierr < <(run "incr-run$r" incr "$URL" --conns "$CONNS" --keys "$KEYS_INCR" | field ops_per_s errors)
    checkpoint
    read -r cr cerr < <(run "pg-incr-run$r" pg-incr "$PGURL" --conns "$CONNS" --keys "$KEYS_INCR" | field ops_per_s errors)
    checkpoint
    echo "run $r: put $pr ops/s p50 $p50 p99 $p99 ms (errors $perr); get $gr ops/s p50 $g50 p99 $g99 ms (errors $gerr);" \
         "incr $ir ops/s (errors $ierr); raw PostgreSQL upsert $cr ops/s (errors $cerr)"
    PUT99+=("$p99"); GET99+=("$g99"); PUT50+=("$p50"); GET50+=("$g50"); INCR+=("$ir"); PGI+=("$cr")
done

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mi=$(median "${INCR[@]}"); mc=$(median "${PGI[@]}")
echo
echo "| figure (median of $RUNS; $CONNS connections, NUM_WORKERS=$WORKERS, DB_POOL_SIZE=$POOL) | value | target |"
echo "|---|---|---|"
echo "| KV put p50 / p99 at $RATE ops/s offered | $(median "${PUT50[@]}") / $(median "${PUT99[@]}") ms | p99 < 5 ms |"
echo "| KV get p50 / p99 at $RATE ops/s offered | $(median "${GET50[@]}") / $(median "${GET99[@]}") ms | p99 < 5 ms |"
echo "| incr on $KEYS_INCR key(s), closed loop | $mi ops/s | |"
echo "| raw PostgreSQL INSERT ... ON CONFLICT DO UPDATE, same connections and keys | $mc ops/s | |"
echo "| incr ÷ raw upsert | $(python3 -c "print(f'{$mi / max($mc, 1):.2f}')") | >= 0.50 |"
