#!/usr/bin/env bash
# bench/flame.sh: a flame graph of the broker under push b100 (issue 18 asks
# for one before and after each change to the push path).
#
# Starts a private PostgreSQL and the broker (bench/lib.sh), pushes
# batch 100 from 50 connections over 100 partitions with queen-bench for
# WARM + DUR s, and records the broker's stacks with `perf record` during
# the DUR s window (DWARF unwinding: the release profile keeps line tables,
# `debug = 1`, and no frame pointers). The stacks are folded and drawn with
# inferno (`cargo install inferno`) into bench/flame/<date>-<commit>-<name>.svg,
# the folded text beside it so two builds can be diffed with
# `inferno-diff-folded`.
#
#   bench/flame.sh                       # target/release/queen, name "push-b100"
#   BROKER_BIN=/tmp/queen-base NAME=base bench/flame.sh
#
# Environment: BROKER_BIN, NAME, BATCH (100), PARTS (100), DUR (10), WARM (2), FREQ (perf samples/s,
# 499), QB (queen-bench, /tmp/target-bench/release/queen-bench), NUM_WORKERS
# (2), DB_POOL_SIZE (8), INFERNO (directory of the inferno binaries, found on
# PATH or in /tmp/inferno/bin). Must run as root (PostgreSQL runs as user
# postgres, perf reads the broker's stacks).
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$BENCH_DIR")
source "$BENCH_DIR/lib.sh"

BROKER_BIN=${BROKER_BIN:-${CARGO_TARGET_DIR:-$REPO/target}/release/queen}
NAME=${NAME:-push-b100}
DUR=${DUR:-10}
BATCH=${BATCH:-100}
PARTS=${PARTS:-100}
WARM=${WARM:-2}
FREQ=${FREQ:-499}
QB=${QB:-/tmp/target-bench/release/queen-bench}
WORKERS=${NUM_WORKERS:-2}
POOL=${DB_POOL_SIZE:-8}
INFERNO=${INFERNO:-$(dirname "$(command -v inferno-flamegraph 2>/dev/null || echo /tmp/inferno/bin/x)")}

for tool in perf "$QB" "$INFERNO/inferno-collapse-perf" "$INFERNO/inferno-flamegraph" "$BROKER_BIN"; do
    command -v "$tool" >/dev/null || [ -x "$tool" ] || { echo "flame.sh: $tool not found" >&2; exit 1; }
done

COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo nocommit)
mkdir -p "$BENCH_DIR/flame"
OUT="$BENCH_DIR/flame/$(date +%F)-$COMMIT-$NAME"
TMP=$(mktemp -d /tmp/queen-flame.XXXXXX)
chmod 755 "$TMP"
trap bench_cleanup EXIT

pg_start
broker_start "$BROKER_BIN" || exit 1

"$QB" push --url "$URL" --pid "$BROKER_PID" --batch "$BATCH" --conns 50 --partitions "$PARTS" \
    --duration "$DUR" --warmup "$WARM" --payload-bytes 100 >"$TMP/push.txt" 2>&1 &
LOAD=$!
sleep "$WARM"
bench_log "perf record -F $FREQ --call-graph dwarf -p $BROKER_PID for ${DUR}s"
perf record -F "$FREQ" --call-graph dwarf,16384 -p "$BROKER_PID" -o "$TMP/perf.data" -- sleep "$DUR" \
    2>"$TMP/perf.log" || { cat "$TMP/perf.log" >&2; exit 1; }
wait "$LOAD" || bench_log "queen-bench exited $?"
tail -3 "$TMP/push.txt" >&2

perf script -i "$TMP/perf.data" 2>/dev/null | "$INFERNO/inferno-collapse-perf" >"$OUT.folded"
"$INFERNO/inferno-flamegraph" --title "queen $COMMIT: push b$BATCH c50 p$PARTS, ${DUR}s" <"$OUT.folded" >"$OUT.svg"
bench_log "wrote $OUT.svg ($(wc -l <"$OUT.folded") distinct stacks)"
